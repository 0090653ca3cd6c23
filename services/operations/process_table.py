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


def the_process(match: Callable[[Process], bool]) -> Process:
    """The one process ``match`` accepts whose parent it does not accept (a forked worker shares
    its parent's command line); LookupError naming how many there were otherwise."""
    every = processes()
    hits = {pid for pid, p in every.items() if match(p)}
    tops = [every[pid] for pid in sorted(hits) if every[pid].parent not in hits]
    if len(tops) != 1:
        raise LookupError(f"{len(tops)} processes match, not 1: {[(p.pid, p.command[:80]) for p in tops]}")
    return tops[0]
