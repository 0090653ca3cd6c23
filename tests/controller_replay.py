"""The check every end-to-end run test makes of its controller: the live decisions in
``controller.jsonl`` equal an independent replay of Algorithm 1 on the run's own probe statistics
(``turn_stats.jsonl``), under the run's staleness."""

from pathlib import Path

from services.contracts.controller import ProbeStats, StepDecision
from services.contracts.jsonl import read_jsonl
from services.contracts.records import TurnStatsRecord
from services.controller.replay import replay
from services.orchestrator.probe_stats import probe_stats
from services.settings.algorithm import DepthSettings


def assert_decisions_equal_replay(
    run_dir: Path, steps: int, depth: DepthSettings, lag: int = 0, env: str | None = None
) -> list[StepDecision]:
    """The run's decisions (returned), once asserted equal to the replay: H_bar, H_hat, H_eff, H_cov,
    and under staleness (``lag`` > 0) the step each plan was made from. ``env``: one source's of a
    multi-environment run (its decisions, its probes, its ``depth``)."""
    decisions = [d for d in read_jsonl(run_dir / "controller.jsonl", StepDecision) if d.env == env]
    turn_stats = [r for r in read_jsonl(run_dir / "turn_stats.jsonl", TurnStatsRecord) if r.env == env]
    probes: dict[int, ProbeStats] = {r.step: probe_stats(r) for r in turn_stats if r.probe}

    def key(d: StepDecision) -> tuple[object, ...]:
        return (d.h_bar, d.h_hat, d.h_eff, d.h_cov) + ((d.planned_from,) if lag else ())

    assert [key(d) for d in decisions] == [key(d) for d in replay(probes, steps, depth, lag)]
    return decisions
