"""`turnopd eval --env search --json` on the untrained tiny student: one report with a per-data-source breakdown."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rollout_fixtures import zoo_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_eval_command_reports_every_data_source(tmp_path: Path, test_cache_dir: Path):
    config = tmp_path / "search.toml"
    config.write_text(
        f'[env_gateway]\ncache_dir = "{test_cache_dir / "envs"}"\nworkers = 1\n'
        f'[models]\ncache_dir = "{zoo_cache_dir()}"\n[cluster]\nrollout_workers = 1\n'
    )
    command = [sys.executable, "-m", "services.cli", "eval", "--model", "student", "--env", "search"]
    command += ["--episodes", "6", "--n", "2", "--max-turns", "3", "--max-new-tokens", "24", "--seed", "5"]
    done = subprocess.run(
        [*command, "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["env"], report["split"]) == ("search", "valid_unseen")
    assert list(report["per_task_type"]) == ["single_hop", "two_hop", "three_hop"]
    assert all(s["tasks"] == 2 and s["episodes"] == 4 for s in report["per_task_type"].values())
    assert report["episodes"] == 12 and report["failed_episodes"] == 0
    assert report["success_rate"] == 0.0  # an untrained student never answers correctly
    # it never writes an <answer> either: every episode plays all 3 turns and is cut by the cap
    assert report["overall"]["mean_turns"] == 3.0 and report["truncated_episodes"] == 12
    assert 0 < report["generated_tokens"] <= 12 * 3 * 24
