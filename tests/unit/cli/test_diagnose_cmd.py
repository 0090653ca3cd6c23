import json

import pytest

from services.contracts.diagnosis import DiagnosisReport


def test_diagnose_json_on_example(cli, examples):
    res = cli("diagnose", examples / "vanilla_run", "--json")
    assert res.code == 0
    report = DiagnosisReport.model_validate_json(res.out)
    data = json.loads(res.out)
    for key in ("reliable_prefix", "deep_loss_budget", "phases", "per_turn"):
        assert key in data
    assert set(report.phases) == {"early", "mid", "late"}
    assert report.steps == 60 and report.reliable_prefix > 0
    assert 0.0 < report.deep_loss_budget < 1.0
    assert sum(t.loss_share_traj for t in report.per_turn) == pytest.approx(1.0)


def test_diagnose_table_on_example(cli, examples):
    res = cli("diagnose", examples / "vanilla_run")
    assert res.code == 0
    assert "Loss allocation" in res.out and "early" in res.out and "overall" in res.out


def test_thresholds_change_the_prefix(cli, examples):
    loose = DiagnosisReport.model_validate_json(cli("diagnose", examples / "vanilla_run", "--json").out)
    strict = cli(
        "diagnose", examples / "vanilla_run", "--json", "--min-survivors", 20, "--min-step-frac", 0.9
    )
    assert DiagnosisReport.model_validate_json(strict.out).reliable_prefix < loose.reliable_prefix


def write_run(tmp_path, lines):
    (tmp_path / "turn_stats.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


GOOD = {
    "step": 1,
    "probe": True,
    "alpha": 0.0,
    "h_roll": 3,
    "trajectories": [{"turn_tokens": [2, 1], "turn_kl_sum": [0.4, 0.1], "success": True, "truncated": False}],
}


def variant(**changes):
    data = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if key.startswith("t_"):
            data["trajectories"][0][key[2:]] = value
        else:
            data[key] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([variant(trajectories=[])], "trajectories: List should have at least 1 item"),
        ([variant(t_turn_tokens=[2, -1])], "turn_tokens.1: Input should be greater than or equal to 0"),
        ([variant(t_turn_kl_sum=[0.1])], "turn_tokens has 2 turns but turn_kl_sum has 1"),
        ([variant(t_turn_tokens=[0, 0])], "step 1: batch has no supervised tokens"),
        ([variant(alpha=1.5)], "alpha: Input should be less than or equal to 1"),
        ([variant(), variant()], "step 1 appears more than once"),
        (['{"step": 1,'], "turn_stats.jsonl:1: not valid JSON"),
        ([variant().replace("0.4", "NaN")], "NaN is not a number"),
    ],
)
def test_bad_turn_stats_is_one_line_error(cli, tmp_path, lines, message):
    res = cli("diagnose", write_run(tmp_path, lines), "--json")
    assert res.code == 2 and res.out == ""
    assert message in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


def test_missing_run_dir_or_file(cli, tmp_path):
    assert "run directory not found" in cli("diagnose", tmp_path / "nope").err
    res = cli("diagnose", tmp_path)
    assert res.code == 2 and "file not found" in res.err


def test_run_config_gives_the_blend_floor(cli, tmp_path):
    from services.settings import TurnOPDSettings

    traj = {"turn_tokens": [2, 1], "turn_kl_sum": [0.4, 0.3], "success": True, "truncated": False}
    line = json.dumps({"step": 1, "probe": True, "alpha": 1.0, "h_roll": 3, "trajectories": [traj, traj]})
    run = write_run(tmp_path, [line])
    default = DiagnosisReport.model_validate_json(cli("diagnose", run, "--json", "--min-survivors", 1).out)
    settings = TurnOPDSettings()
    settings.blend.min_floor = 1
    (run / "config.json").write_text(settings.model_dump_json())
    own = DiagnosisReport.model_validate_json(cli("diagnose", run, "--json", "--min-survivors", 1).out)
    # default floor 8 > 2 trajectories: no reliable turn, actual = trajectory weights; the run's floor 1: equal turns
    assert default.per_turn[1].loss_share == pytest.approx(default.per_turn[1].loss_share_traj)
    # each turn has mass 1/2: turn 0 tokens weigh 1/8 (kl sums 0.4), turn 1 tokens 1/4 (kl sums 0.3)
    assert own.per_turn[1].loss_share == pytest.approx(0.15 / (0.15 + 0.1), rel=1e-6)
