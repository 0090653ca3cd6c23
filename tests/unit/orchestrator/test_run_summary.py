import json

import pytest
from typer.testing import CliRunner

from services.cli.main import build_app
from services.contracts.orchestrator import EvalRecord, StepMetrics, StepTimes
from services.contracts.run_summary import RunSummary
from services.errors import InputError
from services.orchestrator.run_summary import summarize


def step(k: int, probe: bool, h_hat: int, rollout_s: float) -> StepMetrics:
    total = rollout_s + 1.0 + 2.0 + 0.5
    return StepMetrics(
        step=k, method="turnopd", probe=probe, h_roll=40 if probe else h_hat, h_hat=h_hat, h_bar=6.4, h_eff=None,
        h_cov=5, h_ctrl=None, alpha=k / 10, loss=0.5, mean_kl=0.7, grad_norm=1.5, success_rate=0.25,
        truncated_rate=0.5, mean_turns=3.0, trajectories=8, failed_episodes=0, tokens=200, generated_tokens=600,
        weights_version=k, times=StepTimes(rollout_s=rollout_s, teacher_s=1.0, learner_s=2.0, other_s=0.5, total_s=total),
        cumulative_s=0.0,
    )  # fmt: skip


def evaluation(k: int, success: float) -> EvalRecord:
    return EvalRecord(
        step=k, cumulative_s=10.0 * k, split="valid_unseen", episodes=30, n=1, success_rate=success,
        avg_at_n=success, per_task_type={"pick_and_place": success},
    )  # fmt: skip


RUN = [step(1, True, 40, 6.5), step(2, True, 12, 6.5), step(3, False, 12, 2.5), step(4, True, 9, 6.5)]


def test_time_split_depths_and_the_success_change():
    summary = summarize(RUN, [evaluation(4, 0.3), evaluation(0, 0.1)])
    assert summary.steps == 4 and summary.wall_s == pytest.approx(10 + 10 + 6 + 10)
    assert summary.time_split["rollout"].seconds == pytest.approx(22.0)
    assert summary.time_split["learner"].share == pytest.approx(8.0 / 36.0)
    assert sum(t.share for t in summary.time_split.values()) == pytest.approx(1.0)
    assert (
        summary.probe_steps == [1, 2, 4]
        and summary.h_roll == [40, 40, 12, 40]
        and summary.h_hat == [40, 12, 12, 9]
    )
    assert summary.generated_tokens_per_s == pytest.approx(2400 / 22.0)
    assert [e.step for e in summary.evals] == [0, 4] and summary.success_change == pytest.approx(0.2)
    assert summarize(RUN, [evaluation(4, 0.3)]).success_change is None


def test_pool_load_and_weights_lag_over_the_steps_that_recorded_them():
    busy = {"rollout_busy_s": 5.0, "teacher_busy_s": 2.0, "learner_busy_s": 4.0, "overlap_s": 1.0}
    timed = [
        m.model_copy(update={"times": m.times.model_copy(update=busy), "weights_lag": 1}) for m in RUN[2:]
    ]
    summary = summarize([*RUN[:2], *timed], [])
    load = summary.pool_load
    assert load is not None and load.wall_s == pytest.approx(16.0)  # steps 3 and 4 only
    assert load.busy == pytest.approx({"rollout": 10 / 16, "teacher": 4 / 16, "learner": 8 / 16})
    assert load.overlap == pytest.approx(2 / 16)
    assert summary.weights_lag == [None, None, 1, 1]
    assert summarize(RUN, []).pool_load is None


def test_missing_or_out_of_order_steps_are_named():
    with pytest.raises(InputError, match="no logged steps"):
        summarize([], [])
    with pytest.raises(InputError, match=r"not 1\.\.2 in order"):
        summarize([RUN[1], RUN[0]], [])


def test_cli_prints_tables_and_json(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in RUN))
    (tmp_path / "eval.jsonl").write_text(
        evaluation(0, 0.1).model_dump_json() + "\n" + evaluation(4, 0.3).model_dump_json() + "\n"
    )
    runner = CliRunner()
    shown = runner.invoke(build_app(), ["summary", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "4 steps in 36 s" in shown.output and "+20.0 points" in shown.output
    assert "How busy each pool was" not in shown.output and "  lag  " not in shown.output  # not logged
    busy = {"rollout_busy_s": 6.5, "teacher_busy_s": 1.0, "learner_busy_s": 2.7, "overlap_s": 0.0}
    timed = [m.model_copy(update={"times": m.times.model_copy(update=busy), "weights_lag": 0}) for m in RUN]
    (tmp_path / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in timed))
    shown = runner.invoke(build_app(), ["summary", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "30.0%" in [line for line in lines if "learner" in line][-1]  # 4 x 2.7 s of 36 s
    assert "0.0%" in next(line for line in lines if "two or more at once" in line)
    assert "  lag    0 0 0 0  (weights versions behind; 0: on-policy)" in shown.output
    as_json = runner.invoke(build_app(), ["summary", str(tmp_path), "--json"])
    assert RunSummary.model_validate(json.loads(as_json.output)).probe_steps == [1, 2, 4]
    missing = runner.invoke(build_app(), ["summary", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "metrics.jsonl not found" in str(missing.exception)


def test_cli_shows_the_result_against_a_shipped_teacher_measured_on_the_same_games(tmp_path, monkeypatch):
    from services.models import shipped
    from services.settings.tree import TurnOPDSettings

    root = tmp_path / "artifacts"
    (root / "tutor").mkdir(parents=True)
    (root / "tutor" / "config.json").write_text("{}")
    settings = TurnOPDSettings.model_validate(
        {
            "models": {"teacher": "tutor", "cache_dir": str(tmp_path / "cache")},
            "eval": {"episodes": 30, "seed": 0},
        }
    )
    measured = {
        "env": settings.rollout.env, "split": "valid_unseen", "games": 30, "n": settings.eval.val_n,
        "temperature": settings.eval.val_temperature, "max_turns": settings.rollout.max_turns, "seed": 0,
        "success_rate": 0.6, "episodes": 30, "command": "turnopd eval --model tutor",
    }  # fmt: skip
    files = {"config.json": shipped.file_sha256(root / "tutor" / "config.json")}
    manifest = {"format": shipped.ARTIFACT_FORMAT, "files": files, "measured": measured, "recipe": ["x"]}
    (root / "tutor" / shipped.ARTIFACT_MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", root)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(settings.model_dump_json())
    (run / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in RUN))
    (run / "eval.jsonl").write_text(
        evaluation(0, 0.1).model_dump_json() + "\n" + evaluation(4, 0.3).model_dump_json() + "\n"
    )
    shown = CliRunner().invoke(build_app(), ["summary", str(run)])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    row = next(line for line in lines if "teacher, same games" in line)
    assert "60.0%" in row and "30" in row
    assert "50%" in next(line for line in lines if "student / teacher" in line)  # 0.3 / 0.6
    assert "H_hat after each of the 4 steps: 40 12 12 9" in shown.output
    assert "turnopd eval --model tutor" in shown.output


def test_a_multi_environment_run_is_summarised_per_source(tmp_path):
    from services.contracts.orchestrator import SourceStepMetrics

    def part(env, k, h_hat):
        return SourceStepMetrics(
            env=env, probe=k == 1, h_roll=h_hat, h_hat=h_hat, h_bar=h_hat - 0.5, h_eff=None, h_cov=1,
            h_ctrl=None, alpha=0.0, success_rate=0.0, mean_turns=2.0, trajectories=4, failed_episodes=0,
        )  # fmt: skip

    run = [
        m.model_copy(update={"sources": [part("alfworld", m.step, 30 - m.step), part("search", m.step, 5)]})
        for m in RUN
    ]
    evals = [
        evaluation(0, 0.1).model_copy(update={"env": "alfworld"}),
        evaluation(0, 0.5).model_copy(update={"env": "search"}),
        evaluation(4, 0.3).model_copy(update={"env": "alfworld"}),
        evaluation(4, 0.4).model_copy(update={"env": "search"}),
    ]
    summary = summarize(run, evals)
    assert summary.success_change is None and summary.sources is not None
    household, search = summary.sources
    assert (household.env, household.h_hat, household.probe_steps, household.trajectories) == (
        "alfworld",
        [29, 28, 27, 26],
        [1],
        16,
    )
    assert household.success_change == pytest.approx(0.2) and search.success_change == pytest.approx(-0.1)
    (tmp_path / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in run))
    (tmp_path / "eval.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in evals))
    shown = CliRunner().invoke(build_app(), ["summary", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "  search: H_hat  5 5 5 5" in shown.output
    assert "success rate change (search), first to last evaluation: -10.0 points" in shown.output
