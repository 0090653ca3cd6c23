"""Small controller settings and probe statistics shared by the controller's integration tests."""

from services.contracts.controller import ProbeStats
from services.settings import TurnOPDSettings


def small_run_settings(steps: int = 12) -> TurnOPDSettings:
    s = TurnOPDSettings()
    s.optim.steps = steps
    s.depth.max = 12
    s.rollout.max_turns = 12
    s.depth.probe_interval = 3
    s.depth.warmup_steps = 2
    s.depth.min_cov_traj = 2
    return s


def stats_for(k: int) -> ProbeStats:
    depth = 3 + k % 4
    kl = [1.0 / (t + 1 + k) for t in range(depth)]
    return ProbeStats(step=k, kl_per_turn=kl, survivors=[6] * depth, success_turns=[depth - 1, depth - 2, 1])
