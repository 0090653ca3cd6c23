"""The controller's plan/complete logic for every method, without Redis or Ray."""

import pytest

from services.contracts.controller import ProbeStats
from services.controller import schedule
from services.controller.methods import curriculum_depth
from services.controller.replay import replay
from services.errors import ConflictError, InputError
from services.settings import TurnOPDSettings


def make_settings(method="turnopd", steps=10, turn_norm_blend=True, **depth):
    """The controller's own settings, composed from a run's as the stack does."""
    s = TurnOPDSettings()
    s.blend.turn_norm_blend = turn_norm_blend
    s.run.method = method
    s.optim.steps = steps
    s.rollout.max_turns = 20
    s.depth.max = depth.pop("max", 16)
    s.depth.min = depth.pop("min", 2)
    for key, value in depth.items():
        setattr(s.depth, key, value)
    return s.for_controller()


def stats_for(k):
    return ProbeStats(step=k, kl_per_turn=[1.0, 0.5, 0.2, 0.1], survivors=[8, 8, 6, 2], success_turns=[3] * 8)


def run(settings, steps):
    state = schedule.initial_controller_state("r", settings.method, settings)
    plans, decisions = [], []
    for k in range(1, steps + 1):
        p = schedule.plan(state, k, settings)
        state, d = schedule.complete(state, k, stats_for(k) if p.probe else None, settings)
        plans.append(p)
        decisions.append(d)
    return state, plans, decisions


def test_turnopd_plans_follow_algorithm_1_and_the_blend():
    settings = make_settings()
    state, plans, decisions = run(settings, 10)
    assert [p.probe for p in plans] == [True, True, True, False, False, False, False, True, False, False]
    assert all(p.h_roll == 16 for p in plans if p.probe)
    assert all(p.h_roll == p.h_hat for p in plans if not p.probe)
    assert [p.alpha for p in plans] == pytest.approx([k / 10 for k in range(1, 11)])
    assert [p.weights_version for p in plans] == list(range(10))
    expected = list(replay({k: stats_for(k) for k in range(1, 11)}, 10, settings.depth))
    assert decisions == expected
    assert state.probes == 4 and state.depth.step == 10


@pytest.mark.parametrize(
    ("method", "alphas", "full_depth"),
    [
        ("vanilla", [0.0] * 4, True),
        ("adaptive-depth", [0.0] * 4, False),
        ("blend", [0.25, 0.5, 0.75, 1.0], True),
        ("turn-norm", [1.0] * 4, True),
    ],
)
def test_methods_are_switches(method, alphas, full_depth):
    settings = make_settings(method, steps=4, warmup_steps=1, probe_interval=8)
    _, plans, decisions = run(settings, 4)
    assert [p.alpha for p in plans] == pytest.approx(alphas)
    if full_depth:
        assert [p.h_roll for p in plans] == [20] * 4  # rollout.max_turns every step
        assert decisions[0].h_eff is not None  # depth controller still runs in shadow
    else:
        assert plans[0].h_roll == 16 and plans[1].h_roll == plans[1].h_hat


def test_tcod_curriculum_grows_front_to_back():
    settings = make_settings("tcod", steps=4)
    _, plans, decisions = run(settings, 4)
    assert [p.h_roll for p in plans] == [7, 11, 16, 20]
    assert all(not d.probe for d in decisions) and [d.h_roll for d in decisions] == [7, 11, 16, 20]
    assert curriculum_depth(1, 100, 2, 80) == 3 and curriculum_depth(100, 100, 2, 80) == 80


def test_blend_switch_off_means_alpha_zero():
    settings = make_settings(steps=4, turn_norm_blend=False)
    _, plans, _ = run(settings, 4)
    assert [p.alpha for p in plans] == [0.0] * 4


def test_complete_is_idempotent_and_ordered():
    settings = make_settings()
    state = schedule.initial_controller_state("r", "turnopd", settings)
    state1, d1 = schedule.complete(state, 1, stats_for(1), settings)
    again, d1b = schedule.complete(state1, 1, stats_for(1), settings)
    assert again is state1 and d1b == d1
    with pytest.raises(ConflictError, match="does not follow"):
        schedule.complete(state1, 3, None, settings)
    with pytest.raises(InputError, match="outside the run"):
        schedule.plan(state1, 11, settings)
    with pytest.raises(InputError, match="for step 1, not step 2"):
        schedule.complete(state1, 2, stats_for(1), settings)
    with pytest.raises(InputError, match="probe step but no probe statistics"):
        schedule.complete(state1, 2, None, settings)


def test_under_staleness_plans_come_from_the_state_after_step_k_minus_1_minus_s():
    settings = make_settings(steps=10, probe_interval=4, warmup_steps=2)
    states = [schedule.initial_controller_state("r", "turnopd", settings)]  # states[j]: after step j
    for k in range(1, 11):
        basis = states[max(k - 2, 0)]
        p = schedule.plan(basis, k, settings, lag=1)
        state, d = schedule.complete(states[-1], k, stats_for(k) if p.probe else None, settings, basis.depth)
        assert (d.h_hat, d.h_roll, d.planned_from) == (p.h_hat, p.h_roll, max(k - 2, 0))
        states.append(state)
    live = [s.last for s in states[1:]]
    replayed = list(replay({k: stats_for(k) for k in range(1, 11)}, 10, settings.depth, lag=1))
    assert live == replayed
    assert [d.h_hat for d in live] != [d.h_hat for d in run(settings, 10)[2]]  # the lag shows
    with pytest.raises(ConflictError, match="planned from the state after step 1, not after step 2"):
        schedule.plan(states[2], 3, settings, lag=1)
