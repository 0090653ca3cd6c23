"""Start a run's services at once, each as soon as the services it needs are up; stop them the same way.

Most of a service's start-up is a new process importing torch and loading a model, and the learner's
(Ray Train's controller and worker actors) is the longest; one after the other they left a core
idle for most of a run's start. Here each service starts on its own thread once every service it
``needs`` has started. A failure stops nothing itself: every start under way is waited for (so the
caller's exit stack stops what did come up), the services that needed the failed one are not
started, and the first error in start order is raised, the others added to it as notes.

``stop_together`` is the mirror: each service stops once every service that needs it has stopped,
whether or not that stop failed, and every stop runs.

No Ray here: ``start`` and ``stop`` are any callables.
"""

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)


class NeededServiceFailedError(Exception):
    """Not started: a service it needs failed to start (that failure is the one raised)."""


def start_together(
    items: Sequence[K],
    start: Callable[[K], None],
    needs: Mapping[K, Sequence[K]],
    name: Callable[[K], str] = str,
) -> None:
    """``start`` each of ``items`` on its own thread once the ones it ``needs`` (earlier items only)
    have started; return when all have, else raise the first failure in ``items`` order."""
    _together(items, start, needs, name, "starting", skip_after_failure=True)


def stop_together(
    items: Sequence[K],
    stop: Callable[[K], None],
    needs: Mapping[K, Sequence[K]],
    name: Callable[[K], str] = str,
) -> None:
    """``stop`` each of ``items`` (in start order) on its own thread once every item that ``needs``
    it has stopped or failed to; raise the first failure in reverse start order."""
    needed_by: dict[K, list[K]] = {item: [] for item in items}
    for item, needed in needs.items():
        for n in needed:
            needed_by.setdefault(n, []).append(item)
    _together(list(reversed(items)), stop, needed_by, name, "stopping", skip_after_failure=False)


def _together(
    items: Sequence[K],
    act: Callable[[K], None],
    after: Mapping[K, Sequence[K]],
    name: Callable[[K], str],
    doing: str,
    skip_after_failure: bool,
) -> None:
    for i, item in enumerate(items):
        missing = [n for n in after.get(item, ()) if n not in items[:i]]
        if missing:
            raise ValueError(
                f"{name(item)} needs {', '.join(name(m) for m in missing)}, which must come before it"
            )
    futures: dict[K, Future[None]] = {}
    with ThreadPoolExecutor(max_workers=max(len(items), 1), thread_name_prefix=doing) as threads:
        for item in items:
            waits = [(name(n), futures[n]) for n in after.get(item, ())]
            futures[item] = threads.submit(
                _act_after, waits, act, item, f"{doing} {name(item)}", skip_after_failure
            )
        wait(futures.values())  # an interrupt here still waits for the threads (the pool's exit)
    failures = [
        (item, error)
        for item, f in futures.items()
        if (error := f.exception()) is not None and not isinstance(error, NeededServiceFailedError)
    ]
    if not failures:
        return
    (_, error), others = failures[0], failures[1:]
    for item, other in others:
        error.add_note(f"also while {doing} {name(item)}: {type(other).__name__}: {other}")
    raise error


def _act_after(
    waits: list[tuple[str, "Future[None]"]],
    act: Callable[[K], None],
    item: K,
    label: str,
    skip_after_failure: bool,
) -> None:
    for what, future in waits:
        if future.exception() is not None and skip_after_failure:  # blocks until that one is over
            raise NeededServiceFailedError(f"not started: {what} failed to start")
    try:
        act(item)
    except BaseException as exc:
        # said now: the error is raised only once the other starts (a learner's takes a while) are over
        log.error("%s failed: %s: %s", label, type(exc).__name__, exc)
        raise
