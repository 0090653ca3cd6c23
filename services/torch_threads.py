"""torch's CPU threads, set in the thread that computes (torch only; no Ray).

Ray starts a process that reserves less than one CPU with ``OMP_NUM_THREADS=1``, so the teacher's
and the learner's passes run on one thread there, even where the synchronous step leaves the
machine's other cores idle while they run. ``torch.set_num_threads`` sets OpenMP's count for the
thread that calls it, and both services compute in threads other than the one that builds them:
the teacher scores in ``asyncio.to_thread`` workers, and Ray Train runs the train loop in a thread
of its own. Set in a Ray actor's ``__init__``, 2 threads left a matmul in a thread the actor
started later at one thread's speed (2026-11-30, torch 2.13, a 0.5-CPU actor on 2 cores); set in
that thread, it ran twice as fast. So the services call ``use_threads`` where they compute.
"""

import re

import torch

_OMP_THREADS = re.compile(r"omp_get_max_threads\(\) : (\d+)")


def use_threads(threads: int | None) -> None:
    """Give the calling thread's torch passes ``threads`` threads; ``None`` leaves the count as is."""
    if threads is not None:
        torch.set_num_threads(threads)


def effective_threads() -> int:
    """The threads a torch pass started from the calling thread would use: OpenMP's count for this
    thread where torch runs on OpenMP, else torch's own count."""
    found = _OMP_THREADS.search(torch.__config__.parallel_info())
    return int(found.group(1)) if found else torch.get_num_threads()
