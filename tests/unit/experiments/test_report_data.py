"""Report data shaping: turn grids, entropy, smoothing, G_t by phase, controller trace, curves, tables."""

import pytest
from comparison_logs import decision, eval_record, run_logs, turn_stats

from services.contracts.diagnosis import DiagnosisReport, PhaseStats
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.diagnostics.step_stats import step_stats
from services.experiments.protocols import summarise
from services.experiments.report_data import (
    ShownTurns,
    accuracy_curve,
    controller_trace,
    entropy_grid,
    gap_by_phase,
    kl_grid,
    loss_share_grid,
    shown_turns,
    smooth,
)
from services.experiments.tables import (
    allocation_table,
    comparison_markdown,
    comparison_table,
    duration,
    pct_pm,
)
from services.settings.tree import DiagnosticsSettings


def stats_of(records):
    return [step_stats(r, 1, 0.0) for r in records]


def test_kl_and_loss_share_grids_follow_the_survivors():
    # turn_stats: trajectories of 3, 3, 2, 1 turns, 4 tokens per turn, KL sum 2/(t+1) per turn.
    stats = stats_of([turn_stats(1, 0.0, True), turn_stats(2, 0.0, True)])
    grid = kl_grid(stats, 4)
    assert grid.steps == [1, 2] and grid.turns == 4
    assert grid.values[0] == [0.5, 0.25, 0.5 / 3, None]  # K_t = (2/(t+1)) / 4 tokens, turn 3 unreached
    share = loss_share_grid(stats, 3)
    # alpha = 0: seq-mean-token-mean weights 1/(4 trajectories * their tokens: 12, 12, 8, 4), so the loss
    # mass per turn is 2*2/48 + 2/32 + 2/16, 2*1/48 + 1/32, 2*(2/3)/48 = 78/288, 21/288, 8/288.
    assert share.values[1] == pytest.approx([78 / 107, 21 / 107, 8 / 107], rel=1e-12)


def test_entropy_is_token_weighted_and_none_when_not_recorded():
    grid = entropy_grid([turn_stats(2, 0.0, True), turn_stats(1, 0.0, True)], 4)
    assert grid.steps == [1, 2]
    assert grid.values[0] == [0.25, 0.5, 0.75, None]  # entropy sum (1 + t) over 4 tokens
    bare = TurnStatsRecord(
        step=3,
        probe=False,
        alpha=0.0,
        h_roll=2,
        trajectories=[TrajectoryTurnStats(turn_tokens=[2], turn_kl_sum=[0.5], success=True, truncated=False)],
    )
    grid = entropy_grid([bare], 1)
    assert grid.values == [[None]] and not grid.has_values()


def test_shown_turns_uses_the_reliable_prefix_or_every_observed_turn():
    stats = stats_of([turn_stats(k, 0.0, True) for k in range(1, 6)])
    # survivors per step: [4, 3, 2]
    assert shown_turns(stats, DiagnosticsSettings(min_survivors=3, min_survivor_frac=0.1)) == ShownTurns(
        2, True
    )
    assert shown_turns(stats, DiagnosticsSettings(min_survivors=8)) == ShownTurns(3, False)


def test_smooth_is_a_trailing_mean_over_present_values():
    assert smooth([1.0, 3.0, None, 5.0, 7.0], 2) == [1.0, 2.0, None, 5.0, 6.0]
    assert smooth([2.0, 4.0, 6.0], 1) == [2.0, 4.0, 6.0]
    assert smooth([2.0, 4.0, 6.0], 10) == [2.0, 3.0, 4.0]


def test_gap_by_phase_averages_the_phase_steps():
    # G_t = K_t^fail - K_t^succ: turn 0: 0.5 - 0.5 = 0; turn 1: 0.25 - 0.25 = 0; turn 2: no failure reaches it.
    records = [turn_stats(k, 0.0, True) for k in range(1, 11)]
    gaps = gap_by_phase(stats_of(records), 3)
    assert list(gaps) == ["early", "mid", "late"]
    assert gaps["early"] == [0.0, 0.0, None]
    # make the failures' KL larger at turn 0 in the late phase only
    late = []
    for r in records[6:]:
        trajs = [
            t if t.success else t.model_copy(update={"turn_kl_sum": [4.0, *t.turn_kl_sum[1:]]})
            for t in r.trajectories
        ]
        late.append(r.model_copy(update={"trajectories": trajs}))
    gaps = gap_by_phase(stats_of(records[:6] + late), 3)
    assert gaps["late"][0] == 1.0 - 0.5 and gaps["mid"][0] == 0.0


def test_controller_trace_marks_probes():
    trace = controller_trace([decision(k) for k in (3, 1, 2, 4)])
    assert trace.steps == [1, 2, 3, 4] and trace.probe_steps == [1, 2, 4]
    assert trace.h_eff == [1.0, 1.0, None, 1.0] and trace.h_roll == [6.0, 6.0, 3.0, 6.0]
    assert trace.h_bar == [2.1, 2.2, 2.0 + 0.1 * 3, 2.4]


def test_accuracy_curve_orders_by_step():
    curve = accuracy_curve("turnopd", 1, [eval_record(2, 20.0, 0.5), eval_record(0, 0.0, 0.25)])
    assert (curve.steps, curve.wall_s, curve.accuracy) == ([0, 2], [0.0, 20.0], [0.25, 0.5])


def test_comparison_tables_render_the_summary():
    summary = summarise(
        [
            run_logs("turnopd", 0, 5.0, [0.0, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]),
            run_logs("vanilla", 0, 10.0, [0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75]),
        ],
        6,
    )
    table = comparison_table(summary)
    assert table.header[:5] == [
        "Method",
        "Avg@n Least-Time",
        "Avg@n Same-Step",
        "Wall (6 steps)",
        "Speedup vs vanilla",
    ]
    assert table.rows[0] == ["turnopd", "87.50 ± 12.50", "87.50 ± 12.50", "30.0 s", "2.00x", "6.00", "0"]
    assert table.rows[1][:5] == ["vanilla", "37.50 ± 12.50", "62.50 ± 12.50", "60.0 s", "1.00x"]
    md = comparison_markdown(summary)
    assert "| turnopd | 87.50 ± 12.50 |" in md and "### Per task type, Least-Time" in md
    assert "| vanilla | 37.50 ± 12.50 | 62.50 ± 12.50 | 37.50 ± 12.50 |" in md  # a, b, overall
    assert "<td>87.50 ± 12.50</td>" in table.html()
    assert (duration(7200.0), duration(150.0), duration(12.34)) == ("2.00 h", "2.5 min", "12.3 s")
    assert pct_pm(None, 0.1) == "-" and pct_pm(0.5, None) == "50.00"


def test_allocation_table_rows_per_phase():
    phase = PhaseStats(
        name="early", n_steps=3, first_step=1, last_step=3, alpha_mean=0.25, deep_shallow_kl_ratio=0.31,
        deep_support=0.23, deep_loss_budget=0.036, deep_loss_budget_actual=0.1, gap_per_turn=[],
    )  # fmt: skip
    report = DiagnosisReport(
        steps=3, first_step=1, last_step=3, reliable_prefix=6, shallow_turns=[0, 1], deep_turns=[4, 5],
        min_survivors=8, min_survivor_frac=0.1, min_step_frac=0.6, deep_shallow_kl_ratio=0.31, deep_support=0.23,
        deep_loss_budget=0.036, deep_loss_budget_actual=0.1, phases={"early": phase}, per_turn=[],
    )  # fmt: skip
    table = allocation_table([("vanilla seed 0", report)])
    assert table.rows == [["vanilla seed 0", "early", "1-3", "6", "0.25", "31.0", "23.0", "3.6", "10.0"]]
