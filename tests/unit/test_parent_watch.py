"""A child server's parent watch: the child interrupts itself once the process that started it is
gone (a SIGKILL here, as a SIGTERM'd run's process ends without unwinding), and not before."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.parent_watch import PARENT_ENV, watch_parent

# The child: watches its parent, then waits; an interrupt writes "interrupted" and exits.
_CHILD = """
import sys, time
from services.parent_watch import watch_parent
watch_parent(poll_s=0.05)
try:
    print("watching", flush=True)  # inside the try: from here on an interrupt is written down
    time.sleep(60)
except KeyboardInterrupt:
    open(sys.argv[1], "w").write("interrupted")
"""
# The parent: starts the child with its own pid in the environment, then waits to be killed.
_PARENT = """
import os, subprocess, sys, time
env = dict(os.environ, TURNOPD_PARENT_PID=str(os.getpid()))
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_the_child_stops_once_its_parent_is_killed_and_not_before(tmp_path: Path):
    mark = tmp_path / "mark"
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.pop(PARENT_ENV, None)
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _CHILD, str(mark)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    # the child is up and watching, its parent alive (its start can take seconds on a busy machine:
    # a fixed wait once killed the parent before the child watched)
    assert parent.stdout.readline() == "watching\n"
    time.sleep(0.3)  # several polls of its watch with the parent alive
    assert not mark.exists()
    os.kill(child_pid, 0)  # still running
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20.0
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.read_text() == "interrupted"


def test_without_a_parent_pid_there_is_no_watch(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(PARENT_ENV, raising=False)
    assert watch_parent() is None


def test_a_parent_pid_that_is_not_a_number_is_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(PARENT_ENV, "abc")
    with pytest.raises(ValueError, match="TURNOPD_PARENT_PID must be a process id, got 'abc'"):
        watch_parent()


def test_the_watch_interrupts_its_own_process_when_the_parent_differs(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(PARENT_ENV, str(os.getppid() + 1_000_000))  # never this process's parent
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        thread = watch_parent(poll_s=0.01)
        assert thread is not None
        thread.join(timeout=5.0)
        deadline = time.monotonic() + 5.0
        while not received and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert received == [signal.SIGINT]


def test_a_child_started_with_sigint_ignored_takes_it_again(monkeypatch: pytest.MonkeyPatch):
    """A run started in the background hands its children SIGINT ignored (the CI run of this stop:
    the child above never stopped); the watch's own interrupt and the parent's stop need it."""
    monkeypatch.setenv(PARENT_ENV, str(os.getppid()))  # the real parent: the watch never fires
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert watch_parent(poll_s=60.0) is not None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
