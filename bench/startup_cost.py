"""What one run's start-up costs, process by process: CPU-seconds and wall time (issue 36).

Starts every service of ``--config`` (default ``configs/smoke.toml``) as `turnopd train` does
(``services.operations.stack.start_stack``), stops them, and does it again, in one local Ray cluster,
alternating three learner set-ups for ``--rounds`` rounds:

* ``Ray Train's defaults``: Ray's own ``TorchTrainer`` (its datasets callback starts a
  ``DatasetManager`` actor) and ``RAY_TRAIN_ENABLE_PREEMPTION_WATCHER=1`` (a ``PreemptionWatcher``);
* ``TurnOPD on Ray Train``: ``LearnerTrainer`` without the datasets callback and the watcher off,
  what a learner of several workers or on a GPU runs (``services/learner/service.py``);
* ``one plain actor``: a one-worker CPU learner's default, the same train loop in one actor without
  Ray Train (``services/learner/solo_worker.py``).

For each start it reads, from ``/proc``, the CPU time every process under this one (Ray's raylet
and GCS, every worker and actor, the env gateway, Redis) and this process itself spent between the
call and the moment every service was up, and names each process by its actor class (the title Ray gives the
worker process) or its command. It prints the wall time and CPU-seconds of each start, then per process kind
the CPU-seconds of the least costly start of each setting. Besides, it times two
``ray.util.queue.Queue`` actors (what the learner used for its inbox and outbox before one
``Mailbox`` actor held both) against that one mailbox.

On 2 cores a start-up is CPU-bound: CPU-seconds / 2 is a floor for its wall time.

    PYTHONPATH=$PWD python bench/startup_cost.py [--config configs/smoke.toml] [--rounds 2]
"""

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import ray
from ray.train.torch import TorchTrainer

from services.learner import service as learner_service
from services.operations.stack import logical_cpus_needed, start_stack
from services.ray_session import ensure_ray
from services.run_dir import RunDir
from services.settings import load_settings

WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
TICK = os.sysconf("SC_CLK_TCK")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=Path("configs/smoke.toml"))
    p.add_argument("--rounds", type=int, default=2, help="starts per setting, alternating")
    return p.parse_args()


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU-seconds) of ``pid``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def process_cpu() -> dict[int, float]:
    """CPU-seconds of this process and of every process below it, by pid."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (got := _stat(int(entry))) is not None:
            parents[int(entry)], cpu[int(entry)] = got
    mine, frontier = {os.getpid()}, [os.getpid()]
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    while frontier:
        for child in children[frontier.pop()]:
            if child not in mine:
                mine.add(child)
                frontier.append(child)
    return {pid: cpu[pid] for pid in mine}


def process_kinds() -> dict[int, str]:
    """A name per pid: a Ray worker's title (``ray::ClassName``, the actor it hosts; ``ray::IDLE``),
    else the command's first words."""
    kinds: dict[int, str] = {}
    for pid in process_cpu():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        title = argv[0].decode(errors="replace")
        if pid == os.getpid():
            kinds[pid] = "this driver"
        elif title.startswith("ray::"):
            kinds[pid] = title.split()[0].split(".")[0]
        else:
            kinds[pid] = " ".join(Path(a.decode(errors="replace")).name for a in argv[:3] if a)[:60]
    return kinds


def one_start(config: Path, root: Path, label: str, ray_train: bool) -> tuple[float, dict[str, float]]:
    """Start and stop every service once (the learner on Ray Train, or as one plain actor); the wall
    seconds until all were up and CPU-seconds by kind."""
    settings = load_settings(config)
    run_dir = root / f"{label}-{time.monotonic_ns()}"
    learner = settings.learner.model_copy(update={"ray_train_for_one_worker": ray_train})
    run_settings = settings.run.model_copy(update={"run_dir": str(run_dir)})
    settings = settings.model_copy(update={"run": run_settings, "learner": learner})
    run = RunDir(run_dir)
    run.create(settings)
    before = process_cpu()
    began = time.monotonic()
    with ExitStack() as exits:
        start_stack(settings, run, exits)
        wall = time.monotonic() - began
        after = process_cpu()
        kinds = process_kinds()
    by_kind: dict[str, float] = defaultdict(float)
    for pid, seconds in after.items():
        by_kind[kinds.get(pid, "gone")] += seconds - before.get(pid, 0.0)
    time.sleep(3.0)  # stopped actors' processes exit
    return wall, dict(by_kind)


def queue_actors_cost() -> tuple[float, float]:
    """CPU-seconds of two ``ray.util.queue.Queue`` actors, and of one learner ``Mailbox``, each
    measured from its creation to its first answer."""
    from ray.util.queue import Queue

    from services.learner.mailbox_client import start_mailbox

    def cost(make) -> float:  # type: ignore[no-untyped-def]
        before = process_cpu()
        handles = make()
        after = process_cpu()
        spent = sum(s - before.get(pid, 0.0) for pid, s in after.items() if pid != os.getpid())
        for h in handles:
            ray.kill(h)
        time.sleep(2.0)
        return spent

    def two_queues():  # type: ignore[no-untyped-def]
        queues = [Queue(), Queue()]
        for q in queues:
            q.put(1)
            q.get()
        return [q.actor for q in queues]

    def one_mailbox():  # type: ignore[no-untyped-def]
        actor, inboxes, outbox = start_mailbox(1, {})
        inboxes[0].put(1)
        outbox.put(2)
        inboxes[0].get(1.0)
        return [actor]

    return cost(two_queues), cost(one_mailbox)


def main() -> None:
    args = parse_args()
    settings = load_settings(args.config)
    ensure_ray(logical_cpus_needed(settings))
    setups = {  # the preemption watcher, the trainer class, Ray Train for one worker
        "Ray Train's defaults": ("1", TorchTrainer, True),
        "TurnOPD on Ray Train": ("0", learner_service.LearnerTrainer, True),
        "one plain actor": ("0", learner_service.LearnerTrainer, False),
    }
    results: dict[str, list[tuple[float, dict[str, float]]]] = {label: [] for label in setups}
    with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        for round_ in range(args.rounds):
            for label, (watcher, trainer, ray_train) in setups.items():
                os.environ[WATCHER_ENV] = watcher
                learner_service.LearnerTrainer = trainer  # type: ignore[misc,assignment]  # what Learner builds
                wall, by_kind = one_start(args.config, Path(tmp), f"setup{len(results[label])}", ray_train)
                results[label].append((wall, by_kind))
                print(
                    f"round {round_ + 1} {label}: all up in {wall:.1f} s, "
                    f"{sum(by_kind.values()):.1f} CPU-seconds",
                    flush=True,
                )
    queues, mailbox = queue_actors_cost()

    best = {label: min(runs, key=lambda r: sum(r[1].values())) for label, runs in results.items()}
    kinds = sorted(
        {k for _, by_kind in best.values() for k in by_kind},
        key=lambda k: -best["Ray Train's defaults"][1].get(k, 0),
    )
    print("\nCPU-seconds per process kind, the least costly start of each setting:")
    print(f"| process | {' | '.join(results)} |\n|---{'|---' * len(results)}|")
    for kind in kinds:
        cells = [f"{best[label][1].get(kind, 0.0):.1f}" for label in results]
        print(f"| {kind} | {' | '.join(cells)} |")
    totals = {label: sum(by_kind.values()) for label, (_, by_kind) in best.items()}
    print(f"| total | {' | '.join(f'{totals[label]:.1f}' for label in results)} |")
    walls = {label: statistics.median(w for w, _ in runs) for label, runs in results.items()}
    print(f"| wall s (median of {args.rounds}) | {' | '.join(f'{walls[label]:.1f}' for label in results)} |")
    ray_own = totals["Ray Train's defaults"]
    for label in list(results)[1:]:
        saved = ray_own - totals[label]
        print(
            f"\n{label}: {saved:.1f} CPU-seconds a start fewer than Ray Train's defaults ({saved / ray_own:.0%})"
        )
    print(f"learner boxes: two ray.util.queue actors {queues:.1f} CPU-seconds, one Mailbox {mailbox:.1f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
