"""The frontier page on a hand-made comparison: every number traced to the series below."""

import dataclasses
import json

import pytest
from comparison_logs import run_logs

from services.errors import InputError
from services.experiments.frontier import frontiers, reach_threshold
from services.experiments.frontier_page import (
    FrontierReport,
    Teacher,
    frontier_json,
    frontier_markdown,
    games_of,
)
from services.experiments.frontier_runs import learner_ms_per_token
from services.experiments.protocols import summarise
from services.orchestrator.run_result import Score

# Evaluated before step 1 and after each of 6 steps, on 4 games. Vanilla: 10 s per step, TurnOPD: 5 s.
VANILLA = [0.0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.5]
TURNOPD = [0.0, 0.25, 0.5, 0.5, 0.75, 0.75, 0.75]


def report(teacher: Teacher, vanilla: list[float] = VANILLA, with_runs: bool = True) -> FrontierReport:
    runs = [
        run_logs("turnopd", 0, 5.0, TURNOPD),
        run_logs("turnopd", 1, 5.0, TURNOPD),
        run_logs("vanilla", 0, 10.0, vanilla),
        run_logs("vanilla", 1, 10.0, vanilla),
    ]
    summary = summarise(runs, 6)
    threshold = reach_threshold(summary.methods["vanilla"].same_step_acc)
    games, n = games_of([(e.episodes, e.n) for r in runs for e in r.evals])
    pace = {(r.method, r.seed): learner_ms_per_token(r.metrics) for r in runs} if with_runs else {}
    return FrontierReport(summary, frontiers(runs, threshold), teacher, games, n, pace)


def test_numbers_of_the_page():
    r = report(Teacher(Score("teacher", 0.8, 60), "given"))
    assert r.threshold == pytest.approx(0.45)  # 90% of vanilla's Same-Step 0.5
    # TurnOPD first reaches 0.45 at step 2 (10 s), vanilla at step 3 (30 s)
    assert r.time_ratio == pytest.approx(3.0)
    assert r.over_teacher("turnopd") == pytest.approx(0.75 / 0.8)
    assert r.over_teacher("vanilla") == pytest.approx(0.5 / 0.8)
    data = frontier_json(r)
    assert json.loads(json.dumps(data)) == data
    ours = data["methods"]["turnopd"]
    assert ours["reach"] == {
        "per_seed": [{"seed": 0, "step": 2, "wall_s": 10.0}, {"seed": 1, "step": 2, "wall_s": 10.0}],
        "mean_s": 10.0,
        "reached": 2,
        "vanilla_over_it": 3.0,  # vanilla's 30 s over TurnOPD's 10
    }
    assert data["methods"]["vanilla"]["reach"]["vanilla_over_it"] == 1.0
    assert ours["same_step_acc"] == 0.6875 and ours["least_time_acc"] == 0.6875  # steps 3..6
    assert data["methods"]["vanilla"]["least_time_acc"] == 0.25  # steps 0..3 (0, .25, .25, .5), cut at 30 s
    low, high = ours["best"][0]["interval95"]
    assert (
        ours["best"][0]["step"] == 4
        and low == pytest.approx(0.3006, abs=1e-4)
        and high == pytest.approx(0.9544, abs=1e-4)
    )
    assert data["teacher"]["score"]["episodes"] == 60 and data["games"] == 4 and data["n"] == 1
    assert data["methods"]["vanilla"]["late_slope_per_step"] == pytest.approx(0.0)
    assert data["methods"]["vanilla"]["whole_run_climb_per_step"] == pytest.approx(0.5 / 6)
    # steps 3..6 read .5, .75, .75, .75: sum(dx dy) / sum(dx^2) = 0.375 / 5
    assert data["methods"]["turnopd"]["late_slope_per_step"] == pytest.approx(0.075)
    assert [(r["method"], r["seed"], r["steps"], r["wall_s"]) for r in data["runs"]] == [
        ("turnopd", 0, 6, 30.0), ("turnopd", 1, 6, 30.0), ("vanilla", 0, 6, 60.0), ("vanilla", 1, 6, 60.0)
    ]  # fmt: skip


def test_page_states_the_targets_and_the_shortfalls():
    page = frontier_markdown(report(Teacher(Score("teacher", 0.8, 60), "given")), "frontier.png")
    assert "![Success against cumulative step wall time](frontier.png)" in page
    assert "| turnopd | 10.0 s (step 2) | 10.0 s (step 2) | 10.0 s | 2/2 |" in page
    assert "vanilla / TurnOPD: 3.00x (target >= 1.5x)." in page
    assert "| 94% |" in page  # 0.75 / 0.8
    assert (
        "2 seeds: fewer than the 3" in page and "4 games per evaluation: fewer than the protocol's 60" in page
    )
    assert "vanilla's flattening: too few evaluation points" in page
    # vanilla's last 4 points (steps 3..6) all read 0.5; over the run it climbed 0.5 in 6 steps
    assert (
        "vanilla's climb at the end: over its last 4 evaluation points it gains 0.00 points a step "
        "(least squares, seed mean), against 8.33 a step over the whole run." in page
    )
    # each run: its points with their cumulative step seconds, then its steps' costs
    assert "| vanilla seed 1 | 0.0 | 25.0 (10 s) | 25.0 (20 s) | 50.0 (30 s) |" in page
    assert "| 60.0 s (6 steps) | 6.0 | 60.0% | 20.00 |" in page


def test_page_without_a_teacher_or_a_threshold():
    r = report(
        Teacher(None, "the teacher was measured on other games; pass --teacher-success"), with_runs=False
    )
    assert r.over_teacher("turnopd") is None
    page = frontier_markdown(r, None)
    assert "### Each run" not in page and frontier_json(r)["runs"] == []
    assert "Teacher: the teacher was measured on other games; pass --teacher-success." in page
    flat = report(r.teacher, vanilla=[0.0] * 7)  # vanilla never wins a game
    assert flat.threshold is None
    assert "No threshold: vanilla's final accuracy" in frontier_markdown(flat, None)
    assert flat.time_ratio is None


def test_games_must_be_one_shape():
    assert games_of([(60, 1), (60, 1)]) == (60, 1)
    assert games_of([(240, 4)]) == (60, 4)
    with pytest.raises(InputError, match="differ"):
        games_of([(60, 1), (30, 1)])


def test_points_with_unplayed_episodes_are_named():
    r = report(Teacher(Score("teacher", 0.8, 60), "given"))
    assert "could not be played" not in frontier_markdown(r, None)  # every episode played
    runs = [
        run_logs("turnopd", 0, 5.0, TURNOPD),
        run_logs("vanilla", 0, 10.0, VANILLA),
    ]
    lossy = runs[0].evals[0].model_copy(update={"failed_episodes": 3})
    runs[0] = dataclasses.replace(runs[0], evals=[lossy, *runs[0].evals[1:]])
    summary = summarise(runs, 6)
    methods = frontiers(runs, reach_threshold(summary.methods["vanilla"].same_step_acc))
    assert [(x.seed, x.step, x.failed, x.episodes) for x in methods["turnopd"].lost] == [(0, 0, 3, 4)]
    assert methods["vanilla"].lost == ()
    page = frontier_markdown(FrontierReport(summary, methods, r.teacher, 4, 1), None)
    assert "- turnopd seed 0, step 0: 3 of 4 episodes could not be played and count as failures" in page
    # the record keeps the count through JSON; a record without it reads and writes as before
    line = lossy.model_dump_json()
    assert '"failed_episodes":3' in line and type(lossy).model_validate_json(line) == lossy
    assert "failed_episodes" not in runs[1].evals[0].model_dump_json()
