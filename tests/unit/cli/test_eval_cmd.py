"""`turnopd eval` without Ray: argument errors in one line, and the category table."""

import json
from pathlib import Path

from rich.console import Console

from services.cli.eval_cmd import report_table
from services.contracts.rollout import EvalReport, TaskTypeScore
from services.models.build import MANIFEST


def test_unknown_model_is_one_line_before_anything_starts(cli, tmp_path: Path):
    result = cli("eval", "--model", str(tmp_path / "nowhere"), "--episodes", "2")
    assert result.code == 2
    assert result.err.startswith("error: no model checkpoint at") and result.err.count("\n") == 1


def test_bad_counts_are_usage_errors(cli):
    result = cli("eval", "--model", "student", "--episodes", "0")
    assert result.code == 2 and "--episodes" in result.err


def test_table_has_one_row_per_task_type_with_the_papers_labels_and_an_overall_row():
    score = TaskTypeScore(
        tasks=2,
        episodes=8,
        successes=3,
        failed_episodes=1,
        success_rate=0.375,
        avg_at_n=0.375,
        pass_at_n=0.5,
        mean_turns=4.5,
        mean_reward=0.4,
    )
    report = EvalReport(
        model="teacher",
        env="alfworld",
        split="valid_unseen",
        n=4,
        temperature=0.85,
        max_turns=50,
        seed=0,
        weights_version=0,
        success_rate=0.375,
        avg_at_n=0.375,
        pass_at_n=0.5,
        mean_reward=0.4,
        episodes=8,
        failed_episodes=1,
        truncated_episodes=2,
        per_task_type={"pick_heat_then_place": score},
        overall=score,
        generated_tokens=1000,
        wall_s=12.0,
    )
    console = Console(width=140, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "pick_heat_then_place" in text and "Heat" in text and "Avg@4" in text
    assert "overall" in text and "37.5%" in text and "37.5" in text and "50.0" in text


def test_a_model_trained_with_task_reminders_is_refused_without_them(cli, tmp_path: Path):
    model = tmp_path / "teacher-remind"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / MANIFEST).write_text(json.dumps({"kind": "model", "task_reminder": True}))
    result = cli("eval", "--model", str(model), "--episodes", "2")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "trained with rollout.task_reminder = true" in result.err
    assert "TURNOPD_ROLLOUT__TASK_REMINDER=true" in result.err
