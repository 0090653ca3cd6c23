"""The step-cost fit and the time to threshold at one speed, on runs whose times the model made."""

import dataclasses

import pytest
from comparison_logs import eval_record, run_logs, step_metrics

from services.errors import InputError
from services.experiments.frontier import frontiers
from services.experiments.frontier_page import FrontierReport, Teacher, frontier_json, frontier_markdown
from services.experiments.protocols import summarise
from services.experiments.step_cost import (
    fit_step_cost,
    one_speed,
    one_speed_json,
    one_speed_table,
    steps_ratio_table,
)

A, B = 3.0, 0.5  # seconds per 1k tokens, per (1k tokens)^2 / episodes


def _step(step: int, tokens: int, episodes: int, speed: float, method: str):
    kilo = tokens / 1000.0
    seconds = speed * (A * kilo + B * kilo * kilo / episodes)
    m = step_metrics(step, seconds, method)
    return m.model_copy(update={"tokens": tokens, "trajectories": episodes})


def _metrics(method: str, tokens: list[int], speed: float):
    return [_step(k, t, 8, speed, method) for k, t in enumerate(tokens, start=1)]


VANILLA = [14_000, 15_000, 13_000, 16_000]
TURNOPD = [14_000, 15_000, 9_000, 10_000]  # steps 3 and 4 truncated


def test_the_fit_recovers_the_model_and_each_runs_speed():
    # speeds 0.8 and 1.25: geometric mean 1, so they come back as they went in
    runs = {
        ("vanilla", 0): _metrics("vanilla", VANILLA, 1.25),
        ("turnopd", 0): _metrics("turnopd", TURNOPD, 0.8),
    }
    model = fit_step_cost(runs)
    assert model.a == pytest.approx(A, rel=1e-6)
    assert model.b == pytest.approx(B, rel=1e-6)
    assert model.speeds == {("vanilla", 0): pytest.approx(1.25), ("turnopd", 0): pytest.approx(0.8)}
    assert model.r2 == pytest.approx(1.0)
    assert model.steps == 8
    # a step at speed 1: 10k tokens over 8 episodes
    assert model.seconds(_step(1, 10_000, 8, 1.0, "turnopd")) == pytest.approx(3.0 * 10 + 0.5 * 100 / 8)


def test_the_fit_refuses_what_it_cannot_fit():
    with pytest.raises(InputError, match="at least one run"):
        fit_step_cost({("vanilla", 0): []})
    same = [step_metrics(k, 10.0) for k in range(1, 5)]  # every step 100 tokens over 4 episodes
    with pytest.raises(InputError, match="different token counts"):
        fit_step_cost({("vanilla", 0): same})
    # times that fall as the tokens grow: no model of this shape gives every step a time > 0
    steps = [_step(k, 1000 * k, 8, 1.0, "vanilla") for k in range(1, 5)]
    falling = [
        m.model_copy(update={"times": m.times.model_copy(update={"total_s": 50.0 - 12.0 * m.step})})
        for m in steps
    ]
    with pytest.raises(InputError, match="a time <= 0"):
        fit_step_cost({("vanilla", 0): falling})


def _logs(method: str, tokens: list[int], speed: float, accs: list[float]):
    """A run whose steps the model timed; evaluated before step 1 and after every step."""
    metrics = _metrics(method, tokens, speed)
    cumulative, evals = 0.0, [eval_record(0, 0.0, accs[0])]
    for m, acc in zip(metrics, accs[1:], strict=True):
        cumulative += m.times.total_s
        evals.append(eval_record(m.step, cumulative, acc))
    logs = run_logs(method, 0, 1.0, accs)
    return dataclasses.replace(logs, metrics=metrics, evals=evals)


def test_times_to_the_threshold_at_one_speed():
    # vanilla ran on a host 1.25x slow, TurnOPD on one 0.8x: measured, TurnOPD looks 1.56x faster per step
    vanilla = _logs("vanilla", VANILLA, 1.25, [0.0, 0.25, 0.5, 0.5, 0.5])
    turnopd = _logs("turnopd", TURNOPD, 0.8, [0.0, 0.25, 0.25, 0.5, 0.5])
    runs = [turnopd, vanilla]
    methods = frontiers(runs, 0.45)
    result = one_speed(methods, {(r.method, r.seed): r.metrics for r in runs})
    assert result is not None

    def cost(tokens: list[int]) -> float:
        return sum(A * t / 1000 + B * (t / 1000) ** 2 / 8 for t in tokens)

    (v,), (t,) = result.reaches["vanilla"], result.reaches["turnopd"]
    assert (v.step, t.step) == (2, 3)
    assert v.one_speed_s == pytest.approx(cost(VANILLA[:2]))
    assert v.measured_s == pytest.approx(1.25 * cost(VANILLA[:2]))
    assert t.one_speed_s == pytest.approx(cost(TURNOPD[:3]))
    assert result.ratio == pytest.approx(cost(VANILLA[:2]) / cost(TURNOPD[:3]))
    assert result.ratio < 1.0 < v.measured_s / t.measured_s  # the hosts made TurnOPD look sooner
    assert result.steps_ratio(4) == pytest.approx(cost(VANILLA) / cost(TURNOPD))
    assert result.steps_ratio(5) is None

    table = one_speed_table(summarise(runs, 4), result)
    assert [row[:3] for row in table.rows] == [
        ["turnopd seed 0", "0.80", "3"],
        ["vanilla seed 0", "1.25", "2"],
    ]
    assert f"{result.ratio:.2f}x" in table.note and "R^2 1.000" in table.note
    ratios = steps_ratio_table(result, [0, 2, 4, 8])
    assert ratios.header == ["First k steps", "2", "4"]
    assert ratios.rows == [
        ["vanilla / TurnOPD", f"{result.steps_ratio(2):.2f}", f"{result.steps_ratio(4):.2f}"]
    ]
    data = one_speed_json(result)
    assert data["ratio_vanilla_over_turnopd"] == result.ratio
    assert data["steps_ratio"]["4"] == result.steps_ratio(4)
    assert data["steps_ratio"]["3"] == result.steps_ratio(3)

    # the page shows both tables after the measured times, and its JSON holds the same numbers
    page_of = {}
    for with_fit in (False, True):
        r = FrontierReport(
            summarise(runs, 4), methods, Teacher(None, "none"), 4, 1, one_speed=result if with_fit else None
        )
        page_of[with_fit] = (frontier_markdown(r, None), frontier_json(r))
    page, data = page_of[True]
    assert page.index("### Time to 90%") < page.index("### Time to the threshold at one machine speed")
    assert page.index("### Steps' cost at one machine speed") < page.index("### Best student")
    assert data["one_speed"]["ratio_vanilla_over_turnopd"] == result.ratio
    assert "one machine speed" not in page_of[False][0] and page_of[False][1]["one_speed"] is None


def test_a_seed_that_never_reached_it_leaves_no_ratio_and_no_threshold_no_table():
    vanilla = _logs("vanilla", VANILLA, 1.0, [0.0, 0.25, 0.5, 0.5, 0.5])
    turnopd = _logs("turnopd", TURNOPD, 1.0, [0.0, 0.25, 0.25, 0.25, 0.25])
    runs = [turnopd, vanilla]
    metrics = {(r.method, r.seed): r.metrics for r in runs}
    result = one_speed(frontiers(runs, 0.45), metrics)
    assert result is not None and result.reaches["turnopd"][0].one_speed_s is None
    assert result.ratio is None and result.mean_s("turnopd") is None
    assert "none (a seed never reached" in one_speed_table(summarise(runs, 4), result).note
    assert one_speed(frontiers(runs, None), metrics) is None
    with pytest.raises(InputError, match="no step metrics for vanilla seed 0"):
        one_speed(frontiers(runs, 0.45), {("turnopd", 0): turnopd.metrics})
