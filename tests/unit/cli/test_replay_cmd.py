import json

import pytest

from services.contracts.controller import ProbeStats
from services.contracts.jsonl import read_jsonl
from services.controller.replay import replay
from services.settings.algorithm import DepthSettings

KEYS = ["step", "probe", "h_roll", "h_hat", "h_bar", "h_eff", "h_cov", "h_ctrl"]


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replay_example_prints_one_line_per_step(cli, examples):
    res = cli("controller", "replay", examples / "probes.jsonl", "--steps", 40, "--h-max", 30, "--h-min", 3)
    assert res.code == 0
    rows = res.json_lines()
    assert [r["step"] for r in rows] == list(range(1, 41))
    assert list(rows[0]) == KEYS
    snaps = {s.step: s for s in read_jsonl(examples / "probes.jsonl", ProbeStats)}
    expected = [d.model_dump() for d in replay(snaps, 40, DepthSettings(max=30, min=3))]
    assert rows == expected
    assert rows[0]["h_roll"] == 30 and rows[0]["h_hat"] == 30  # H_bar_0 = H_max
    assert "ignored" in res.err  # snapshots on non-probe steps are reported, not silently used


def test_options_reach_the_controller(cli, tmp_path):
    snaps = [json.dumps({"step": k, "kl_per_turn": [1.0, 1.0], "survivors": [4, 4]}) for k in (1, 2)]
    path = write_lines(tmp_path / "p.jsonl", snaps)
    res = cli(
        "controller", "replay", path, "--steps", 3, "--warmup-steps", 0, "--probe-interval", 2,
        "--ema-alpha", 1.0, "--h-max", 10, "--h-min", 1,
    )  # fmt: skip
    rows = res.json_lines()
    assert res.code == 0
    assert [r["probe"] for r in rows] == [False, True, False]
    assert rows[1]["h_bar"] == 0.0  # ema_alpha = 1: H_bar = H_ctrl = round(0.5) = 0
    assert rows[2]["h_roll"] == 1


def test_config_file_gives_defaults(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[depth]\nmax = 12\nwarmup_steps = 1\n[optim]\nsteps = 2\n")
    path = write_lines(
        tmp_path / "p.jsonl", [json.dumps({"step": 1, "kl_per_turn": [1.0], "survivors": [2]})]
    )
    rows = cli("controller", "replay", path, "--config", cfg).json_lines()
    # step 1 probes at H_max = 12 (H_eff = 0, H_cov = 0): H_bar = 0.7 * 12 = 8.4 -> step 2 rolls round(8.4)+1 = 9
    assert [r["h_roll"] for r in rows] == [12, 9]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"step": 1, "kl_per_turn": [0.1], "survivors": [2]'], "p.jsonl:1: not valid JSON"),
        (['{"step": 1, "kl_per_turn": [NaN], "survivors": [2]}'], "NaN is not a number"),
        (
            ['{"step": 1, "kl_per_turn": [0.1, 0.2], "survivors": [2, -1]}'],
            "survivors.1: Input should be greater",
        ),
        (['{"step": 1, "kl_per_turn": [0.1], "survivors": [0]}'], "the probe batch is empty"),
        (['{"step": 1, "kl_per_turn": [0.1, 0.2], "survivors": [2]}'], "kl_per_turn has 2 turns"),
        (
            ['{"step": 1, "kl_per_turn": [], "survivors": []}'],
            "kl_per_turn: List should have at least 1 item",
        ),
        (["[1, 2]"], "expected a JSON object"),
        (['{"step": 1, "kl_per_turn": [0.1], "survivors": [2], "extra": 1}'], "extra: unknown key"),
        (
            ['{"step": 2, "kl_per_turn": [0.1], "survivors": [2]}'],
            "step 1 is a probe step but the snapshots have no line",
        ),
        (
            [
                '{"step": 1, "kl_per_turn": [0.1], "survivors": [2]}',
                '{"step": 1, "kl_per_turn": [0.1], "survivors": [2]}',
            ],
            "step 1 appears more than once",
        ),
        ([""], "has no records"),
    ],
)
def test_bad_input_is_one_line_error(cli, tmp_path, lines, message):
    res = cli("controller", "replay", write_lines(tmp_path / "p.jsonl", lines), "--steps", 3)
    assert res.code == 2
    assert res.out == ""  # nothing half-written
    assert message in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


def test_missing_file_and_bad_option(cli, tmp_path):
    res = cli("controller", "replay", tmp_path / "nope.jsonl")
    assert res.code == 2 and "file not found" in res.err
    res = cli("controller", "replay", tmp_path / "nope.jsonl", "--ema-alpha", "2")
    assert res.code == 2 and "depth.ema_alpha" in res.err
    res = cli("controller", "replay", tmp_path / "nope.jsonl", "--steps", "x")
    assert res.code == 2 and "--steps" in res.err and len(res.err.strip().splitlines()) == 1


def test_lag_plans_each_step_from_the_state_s_steps_older(cli, examples):
    args = ["controller", "replay", examples / "probes.jsonl", "--steps", 40, "--h-max", 30, "--h-min", 3]
    synchronous = cli(*args).json_lines()
    res = cli(*args, "--lag", 2)
    assert res.code == 0
    rows = res.json_lines()
    assert list(rows[0]) == [*KEYS, "planned_from"]
    assert [r["planned_from"] for r in rows] == [max(k - 3, 0) for k in range(1, 41)]
    assert [r["h_bar"] for r in rows] == [r["h_bar"] for r in synchronous]  # the EMA is the same
    assert [r["h_hat"] for r in rows[3:]] != [r["h_hat"] for r in synchronous[3:]]
    snaps = {s.step: s for s in read_jsonl(examples / "probes.jsonl", ProbeStats)}
    assert rows == [d.model_dump() for d in replay(snaps, 40, DepthSettings(max=30, min=3), lag=2)]
    assert cli(*args, "--lag", -1).code == 2


def test_a_multi_environment_run_replays_one_sources_controller(cli, tmp_path):
    from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
    from services.orchestrator.probe_stats import probe_stats
    from services.settings import load_settings

    settings = load_settings(
        None,
        {
            "optim": {"steps": 6},
            "depth": {"warmup_steps": 1, "probe_interval": 2, "max": 12},
            "sources": [
                {"env": "alfworld", "share": 0.5, "teacher": "a"},
                {"env": "search", "share": 0.5, "teacher": "b", "depth": {"max": 5, "min": 1}},
            ],
        },
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(settings.model_dump_json())

    def record(step, env, turns):
        stats = [
            TrajectoryTurnStats(
                turn_tokens=[2] * turns, turn_kl_sum=[0.5] * turns, success=True, truncated=False
            )
        ] * 2
        return TurnStatsRecord(step=step, probe=True, alpha=0.0, h_roll=5, trajectories=stats, env=env)

    records = [
        record(k, env, 4 if env == "alfworld" else 2) for k in range(1, 7) for env in ("alfworld", "search")
    ]
    write_lines(run / "turn_stats.jsonl", [r.model_dump_json() for r in records])
    res = cli("controller", "replay", run, "--env", "search")
    assert res.code == 0, res.err
    probes = {r.step: probe_stats(r) for r in records if r.env == "search" and r.probe}
    assert res.json_lines() == [
        d.model_dump() for d in replay(probes, 6, settings.for_controller("search").depth)
    ]
    assert max(row["h_roll"] for row in res.json_lines()) == 5  # search's own H_max
    refused = cli("controller", "replay", run)
    assert refused.code == 2 and "name one with --env" in refused.err
