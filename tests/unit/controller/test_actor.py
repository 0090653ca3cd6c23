"""The controller service (the actor's body) under staleness, over an in-memory store: no Ray, no Redis."""

import pytest
from step_fakes import MemoryStore

from services.contracts.controller import ProbeStats
from services.controller.actor import ControllerService
from services.controller.replay import replay
from services.errors import ConflictError
from services.settings import TurnOPDSettings
from services.settings.per_service import ControllerServiceSettings


def settings() -> ControllerServiceSettings:
    s = TurnOPDSettings()
    s.optim.steps = 8
    s.depth.max, s.depth.min, s.depth.probe_interval, s.depth.warmup_steps = 16, 2, 2, 2
    return s.for_controller()


def stats(k: int) -> ProbeStats:
    # the KL mass moves to earlier turns step by step, so H_bar keeps changing
    kl = [1.0, 0.8 / k, 0.6 / k, 0.4 / k, 0.2 / k]
    return ProbeStats(step=k, kl_per_turn=kl, survivors=[8, 8, 6, 4, 2], success_turns=[4] * 8)


def test_staleness_1_plans_from_the_state_after_step_k_minus_2_whatever_was_ingested_since():
    store = MemoryStore()
    service = ControllerService(settings(), "r", store)
    plans = {1: service.plan(1, lag=1), 2: service.plan(2, lag=1)}  # both from the initial state
    decisions = []
    for k in range(1, 9):
        decisions.append(service.ingest(k, stats(k) if plans[k].probe else None, lag=1))
        if k + 1 in plans:  # planned again after a later ingest (a controller restart): the same plan
            assert service.plan(k + 1, lag=1) == plans[k + 1]
        if k + 2 <= 8:
            plans[k + 2] = service.plan(k + 2, lag=1)
    assert [d.planned_from for d in decisions] == [0, 0, 1, 2, 3, 4, 5, 6]
    assert [p.weights_version for p in plans.values()] == [0, 0, 1, 2, 3, 4, 5, 6]
    assert [d.h_hat for d in decisions] == [plans[k].h_hat for k in range(1, 9)]
    assert decisions == list(replay({k: stats(k) for k in (1, 2, 4, 6, 8)}, 8, settings().depth, lag=1))
    assert len({d.h_hat for d in decisions}) > 1  # the depth really moved
    assert store.reads > 0  # a plan made after a later ingest rebuilt its basis from the decisions


def test_a_plan_whose_basis_is_not_ingested_yet_is_refused_and_ingest_retries_return_the_stored_step():
    service = ControllerService(settings(), "r", MemoryStore())
    with pytest.raises(
        ConflictError, match=r"step 3 is planned from the state after step 1, .* ingest step 1 first"
    ):
        service.plan(3, lag=1)
    first = service.ingest(1, stats(1), lag=1)
    assert service.ingest(1, stats(1), lag=1) == first and len(service.store.saved) == 1


def test_after_a_rewind_the_plans_are_the_same():
    service = ControllerService(settings(), "r", MemoryStore())
    for k in range(1, 5):
        service.ingest(k, stats(k) if k <= 2 or k % 2 == 0 else None, lag=1)
    before = [service.plan(k, lag=1) for k in (5, 6)]
    service.rewind(3)  # a resumed run at step 3's checkpoint
    assert service.plan(4, lag=1).step == 4
    again = service.ingest(4, stats(4), lag=1)
    assert again.planned_from == 2 and [service.plan(k, lag=1) for k in (5, 6)] == before


def test_the_synchronous_rule_is_unchanged():
    service = ControllerService(settings(), "r", MemoryStore())
    plan = service.plan(1)
    decision = service.ingest(1, stats(1))
    assert (plan.weights_version, decision.planned_from) == (0, None)
    assert service.plan(2).weights_version == 1
    with pytest.raises(ConflictError):
        service.plan(3)
