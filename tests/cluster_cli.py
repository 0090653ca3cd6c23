"""`turnopd` commands in processes of their own, joined to the test session's Ray cluster (as on a
cluster that outlives its drivers), with this checkout on their path."""

import os
import subprocess
import sys
from pathlib import Path

import ray

REPO = Path(__file__).resolve().parents[1]


def _command(args: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address, PYTHONPATH=str(REPO))
    return [sys.executable, "-m", "services.cli", *args], env


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`turnopd ARGS`, run to its end (at most 600 s), its output captured."""
    command, env = _command(args)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def cli_process(*args: str) -> subprocess.Popen[str]:
    """`turnopd ARGS`, started: its stdout and stderr together in one pipe."""
    command, env = _command(args)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
