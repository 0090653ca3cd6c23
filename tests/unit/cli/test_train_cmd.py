"""`turnopd train`: the progress line (the run's depth and blend, or each task source's), and the
settings a resumed run gives its services."""

from pathlib import Path

from comparison_logs import source_part, step_metrics

from services.cli.train_cmd import depth_text, resumed_settings
from services.run_dir import CONFIG_FILE, RunDir
from services.settings import load_settings

REPO = Path(__file__).resolve().parents[3]


def test_a_single_source_run_shows_its_controllers_depth_and_blend():
    assert depth_text(step_metrics(1, 2.0, "turnopd")) == "probe H_roll=6   H_hat=6   alpha=0.00"
    assert depth_text(step_metrics(3, 2.0, "turnopd", h_roll=12)) == "      H_roll=12  H_hat=12  alpha=0.00"


def test_a_multi_environment_run_shows_each_sources_own():
    step = step_metrics(3, 2.0, "turnopd").model_copy(
        update={"sources": [source_part("alfworld", 12, 0.25, probe=True), source_part("search", 4, 0.5)]}
    )
    assert depth_text(step) == (
        "alfworld(probe): H_roll=12 H_hat=12 alpha=0.25 search: H_roll=4 H_hat=4 alpha=0.50"
    )


def test_a_resumed_multi_environment_run_gives_every_service_its_saved_settings(tmp_path, monkeypatch):
    """configs/multi_env.toml, saved and resumed: each service's settings object is the original's,
    the env gateway's (search max_turns 10, bm25, top 3; the shop's goals) and the token included."""
    monkeypatch.setenv("TURNOPD_SERVICE_TOKEN", "s3cret")
    original = load_settings(REPO / "configs" / "multi_env.toml", {"run": {"run_dir": tmp_path / "run"}})
    run = RunDir(original.run.run_dir)
    run.create(original)
    assert "s3cret" not in run.path(CONFIG_FILE).read_text()

    resumed = resumed_settings(run)
    assert resumed.for_env_gateway() == original.for_env_gateway()
    assert resumed.for_env_gateway().env_gateway.search.max_turns == 10
    assert resumed.for_env_gateway().service_token.get_secret_value() == "s3cret"
    assert resumed.for_controllers() == original.for_controllers()
    assert resumed.for_teachers() == original.for_teachers()
    assert resumed.for_rollout_worker() == original.for_rollout_worker()
    assert resumed.for_learner() == original.for_learner()
    assert resumed.for_redis() == original.for_redis()


def test_stop_after_is_checked_before_a_run_starts(tmp_path, cli):
    """configs/smoke.toml checkpoints every 2 of its 3 steps: a sitting may end after step 2 (or 3),
    and a bad --stop-after is refused before Ray starts, naming the steps that would do."""
    settings = load_settings(REPO / "configs" / "smoke.toml", {"run": {"run_dir": tmp_path / "run"}})
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    refused = cli("train", "--resume", run.root, "--stop-after", "1")
    assert refused.code != 0 and "checkpoints every 2 steps" in refused.err and "stop after 2" in refused.err
    assert not run.path("metrics.jsonl").exists()
    mixed = cli("train", "--resume", run.root, "--steps", "2")
    assert mixed.code != 0 and "(but --stop-after)" in mixed.err
