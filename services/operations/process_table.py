"""The machine's processes as /proc shows them (Linux): to find a run's processes from outside it,
as an operator would to kill one (the chaos test, ``bench/process_kills.py``)."""

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    pid: int
    command: str  # the command line, or the title Ray gives an actor's process (``ray::Class``)
    cwd: str
    parent: int


def processes() -> dict[int, Process]:
    """Every process this user may read, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = Process(int(entry.name), command, cwd, parent)
    return found


def descendants(every: dict[int, Process], root: int) -> set[int]:
    """The pids below ``root`` in the process tree (its children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for p in every.values():
        children.setdefault(p.parent, []).append(p.pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def the_process(match: Callable[[Process], bool], within: int | None = None) -> Process:
    """The one process ``match`` accepts whose parent it does not accept (a forked worker shares
    its parent's command line), among the descendants of ``within`` if given (a run's own: another
    run on the machine has processes of the same names); LookupError naming how many there were
    otherwise."""
    every = processes()
    if within is not None:
        below = descendants(every, within)
        every = {pid: p for pid, p in every.items() if pid in below}
    hits = {pid for pid, p in every.items() if match(p)}
    tops = [every[pid] for pid in sorted(hits) if every[pid].parent not in hits]
    if len(tops) != 1:
        raise LookupError(f"{len(tops)} processes match, not 1: {[(p.pid, p.command[:80]) for p in tops]}")
    return tops[0]


# A run's processes by kind, as the run dir names them: redis-server retitles itself
# ".../redis-server 127.0.0.1:PORT" and runs in its data directory; the gateway's command line names
# the run's settings file; Ray titles an actor's process ``ray::Class``.
RUN_PROCESSES: dict[str, Callable[[Process, str], bool]] = {
    "learner": lambda p, run: p.command.startswith("ray::SoloLearnerWorker"),
    "run-control": lambda p, run: p.command.startswith("ray::RunControlActor"),
    "teacher-replica": lambda p, run: p.command.startswith("ray::ServeReplica:teacher"),
    "redis-server": lambda p, run: "redis-server " in p.command and p.cwd.startswith(run),
    "env-gateway": lambda p, run: "serve env-gateway" in p.command and run in p.command,
}


def run_process(kind: str, run: Path, within: int) -> int:
    """The pid of the run's process of ``kind`` (a key of ``RUN_PROCESSES``, or ``env-worker``: the
    gateway's first env worker process), among the descendants of ``within`` (its driver)."""
    if kind != "env-worker":
        return the_process(lambda p: RUN_PROCESSES[kind](p, str(run)), within).pid
    gateway = run_process("env-gateway", run, within)
    workers = sorted(
        p.pid
        for p in processes().values()
        if p.parent == gateway and "services.env_gateway.worker_process" in p.command
    )
    if not workers:
        raise LookupError(f"the env gateway (pid {gateway}) has no worker process")
    return workers[0]
