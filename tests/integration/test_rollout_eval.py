"""`turnopd eval` from the command line (its own Ray and env gateway), and its reproducibility."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rollout_fixtures import gateway_config, rollout_settings, zoo_cache_dir

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.jsonl import read_jsonl
from services.contracts.trajectory import Trajectory
from services.env_gateway.local_server import LocalGateway
from services.rollout_worker.eval_runner import EvalSpec, run_eval

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def zoo():
    return zoo_cache_dir()


def test_eval_command_prints_one_json_report_with_every_task_type(tmp_path, zoo):
    config = gateway_config(tmp_path)
    config.write_text(config.read_text() + f'\n[models]\ncache_dir = "{zoo}"\n')
    command = [sys.executable, "-m", "services.cli", "eval", "--model", "student", "--episodes", "6"]
    command += ["--n", "2", "--max-turns", "2", "--max-new-tokens", "16", "--seed", "3", "--json"]
    command += ["--trajectories", str(tmp_path / "played.jsonl")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [*command, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report["per_task_type"]) == set(HOUSEHOLD_TASK_TYPES)
    assert report["success_rate"] == 0.0 and report["avg_at_n"] == 0.0  # an untrained student
    assert (report["episodes"], report["failed_episodes"], report["truncated_episodes"]) == (12, 0, 12)
    assert all(score["tasks"] == 1 and score["episodes"] == 2 for score in report["per_task_type"].values())
    assert report["overall"]["mean_turns"] == 2.0 and report["n"] == 2 and report["seed"] == 3
    played = read_jsonl(tmp_path / "played.jsonl", Trajectory)
    assert len(played) == 12 and all(len(t.turns) == 2 and t.weights_version == 0 for t in played)


def test_eval_is_reproducible_from_its_seed_whatever_the_pool_size(ray_session, tmp_path, zoo):
    config = gateway_config(tmp_path)
    spec = EvalSpec(
        model="student",
        env="alfworld",
        split="valid_unseen",
        episodes=6,
        n=2,
        temperature=0.85,
        max_turns=3,
        seed=1,
        max_new_tokens=24,
    )
    with LocalGateway(config, workers=1) as gateway:

        def evaluate(workers: int, seed: int):  # type: ignore[no-untyped-def]
            settings = rollout_settings(config, zoo, workers=workers)
            settings.rollout_worker.eval_chunk_episodes = 4
            spec_with_seed = EvalSpec(**{**spec.__dict__, "seed": seed})
            return run_eval(settings, spec_with_seed, env_url=gateway.url)

        two_workers = evaluate(2, seed=1)
        one_worker = evaluate(1, seed=1)
        other_seed = evaluate(1, seed=2)
    assert two_workers.report.model_dump(exclude={"wall_s"}) == one_worker.report.model_dump(
        exclude={"wall_s"}
    )
    assert [t.token_ids for t in two_workers.result.trajectories] == [
        t.token_ids for t in one_worker.result.trajectories
    ]
    assert two_workers.report.episodes == 12 and two_workers.report.failed_episodes == 0
    assert [t.token_ids for t in other_seed.result.trajectories] != [
        t.token_ids for t in two_workers.result.trajectories
    ]
