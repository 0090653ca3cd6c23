"""Rebuilding what the controller's store lost from the run's records (pure: no Ray, no Redis)."""

import pytest
from step_fakes import MemoryStore

from services.contracts.controller import ProbeStats, StepDecision
from services.contracts.controller_state import ControllerState
from services.controller import schedule
from services.controller.actor import ControllerService
from services.controller.recovery import DecisionLog, logged_decisions, rebuild
from services.errors import ConflictError
from services.settings import TurnOPDSettings
from services.settings.per_service import ControllerServiceSettings


def settings() -> ControllerServiceSettings:
    s = TurnOPDSettings()
    s.optim.steps = 8
    s.depth.max, s.depth.min, s.depth.probe_interval, s.depth.warmup_steps = 16, 2, 2, 2
    return s.for_controller()


def stats(k: int) -> ProbeStats:
    kl = [1.0, 0.8 / k, 0.6 / k, 0.4 / k, 0.2 / k]
    return ProbeStats(step=k, kl_per_turn=kl, survivors=[8, 8, 6, 4, 2], success_turns=[4] * 8)


def history(steps: int) -> tuple[list[StepDecision], list[ControllerState]]:
    """A controller's decisions of steps 1..steps and its state after each step (states[k])."""
    service = ControllerService(settings(), "r", MemoryStore())
    decisions, states = [], [service.state]
    for k in range(1, steps + 1):
        plan = service.plan(k)
        decisions.append(service.ingest(k, stats(k) if plan.probe else None))
        states.append(service.state)
    return decisions, states


def initial() -> ControllerState:
    return schedule.initial_controller_state("r", settings().method, settings())


def test_a_store_that_lost_its_last_write_is_rebuilt_from_the_runs_log():
    decisions, states = history(5)
    rebuilt = rebuild(states[4], decisions[:4], decisions, None, initial(), settings())
    assert rebuilt is not None
    assert rebuilt.state == states[5] and list(rebuilt.decisions) == decisions and rebuilt.held == 4
    assert rebuilt.describe("search") == (
        "Redis had lost the search controller's step 5 (it held step 4); "
        "rebuilt from the run's controller.jsonl and the live controller"
    )


def test_an_empty_store_is_rebuilt_whole_from_the_log():
    decisions, states = history(6)
    rebuilt = rebuild(None, [], decisions, None, initial(), settings())
    assert rebuilt is not None and rebuilt.state == states[6] and rebuilt.held == 0
    assert "the controller's steps 1..6 (it held step 0)" in rebuilt.describe(None)


def test_mid_run_the_live_controller_gives_the_step_the_log_has_not_yet():
    decisions, states = history(4)
    # Redis came back at step 2; the driver logged step 3; the live controller has completed step 4
    rebuilt = rebuild(states[2], decisions[:2], decisions[:3], states[4], initial(), settings())
    assert rebuilt is not None and rebuilt.state == states[4] and list(rebuilt.decisions) == decisions


def test_a_whole_store_or_a_log_that_lags_it_needs_nothing():
    decisions, states = history(4)
    assert rebuild(states[4], decisions, decisions[:3], None, initial(), settings()) is None
    assert rebuild(states[4], decisions, decisions, states[4], initial(), settings()) is None
    assert rebuild(None, [], [], None, initial(), settings()) is None  # a fresh run


def test_a_decisions_list_shorter_than_its_state_is_made_whole():
    decisions, states = history(4)
    rebuilt = rebuild(states[4], decisions[:3], [], None, initial(), settings())  # state.last gives step 4
    assert rebuilt is not None and list(rebuilt.decisions) == decisions and rebuilt.held == 3


def test_a_step_in_no_record_is_refused_not_guessed():
    decisions, states = history(4)
    with pytest.raises(ConflictError, match=r"steps \[3\] are in none of Redis"):
        rebuild(states[2], decisions[:2], decisions[:2], states[4], initial(), settings())


def test_records_that_disagree_are_refused():
    decisions, states = history(3)
    other = decisions[1].model_copy(update={"h_bar": decisions[1].h_bar + 1.0})
    with pytest.raises(ConflictError, match=r"step 2's decision differs between Redis and controller\.jsonl"):
        rebuild(states[2], decisions[:2], [decisions[0], other, decisions[2]], None, initial(), settings())


def test_the_log_gives_each_controller_its_own_lines_and_skips_a_line_being_written(tmp_path):
    decisions, _ = history(2)
    lines = [d.model_copy(update={"env": env}) for d in decisions for env in ("alfworld", "search")]
    text = "".join(d.model_dump_json() + "\n" for d in lines) + '{"step": 3, "pro'
    assert logged_decisions(text, "search") == decisions
    assert logged_decisions("".join(d.model_dump_json() + "\n" for d in decisions), None) == decisions
    path = tmp_path / "controller.jsonl"
    assert DecisionLog(path, None).decisions() == []  # no step logged yet
    path.write_text(text)
    assert DecisionLog(path, "alfworld").decisions() == decisions


def test_a_controller_starting_on_a_store_that_lost_writes_rebuilds_it_and_says_so(tmp_path):
    decisions, states = history(5)
    log = tmp_path / "controller.jsonl"
    log.write_text("".join(d.model_dump_json() + "\n" for d in decisions))
    store = MemoryStore()
    store.state, store.saved = states[3], decisions[:3]
    service = ControllerService(settings(), "r", store, DecisionLog(log, None))
    assert service.state == states[5] and store.state == states[5] and store.saved == decisions
    health = service.health()
    assert health.rebuilt_steps == 2 and "steps 4..5 (it held step 3)" in health.rebuilt
    assert service.rewind(4) == states[4]  # a resume at step 4's checkpoint goes on
