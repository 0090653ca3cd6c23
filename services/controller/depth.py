"""The adaptive rollout-depth controller (paper Sec. 5.1 and Algorithm 1), as pure functions.

Turn indices are 0-based. At step k (1-based):

    H_hat_k = clip(round(H_bar_{k-1}) + 1, H_min, H_max)       (+1: turn index -> depth)
    probe_k = k <= warmup_steps or k % probe_interval == 0
    H_roll  = H_max if probe_k else H_hat_k
    on probe steps, from the uncensored probe batch:
        m_t = [K_t]_+ * n_t / n_0,   q_t = m_t / (sum_j m_j + eps),   H_eff = round(sum_t t q_t)
        if the CDF source has >= min_cov_traj trajectories: H_cov = min{H : F(H) >= p}
        H_ctrl = max(H_eff, H_cov);  H_bar_k = (1 - ema_alpha) H_bar_{k-1} + ema_alpha H_ctrl
    otherwise H_bar_k = H_bar_{k-1}.
    H_bar_0 = H_max, H_cov starts at 0 and keeps its last value until refreshed.

Under staleness s (``[pipeline] max_staleness``: the rollouts of step k play while the learner
still trains steps k-s..k-1), step k's applied depth comes from the state after step k-1-s:

    H_hat_k = clip(round(H_bar_{max(k-1-s, 0)}) + 1, H_min, H_max)

and nothing else changes: the probe schedule depends on k alone, and the EMA still folds the
probes in step order, H_bar_k from H_bar_{k-1}. s = 0 is the rule above.

``round`` is Python's (half to even). F(H) is the empirical CDF of 0-based final-turn indices,
so H_cov is the inverted-CDF p-quantile. With ``use_success`` the source is the successful probe
trajectories' final turns; without it, all probe trajectories, whose final turns follow from the
survivor counts (n_t - n_{t+1} trajectories end at turn t).
"""

from collections import Counter
from collections.abc import Sequence

from services.contracts.controller import DepthState, ProbeStats, StepDecision
from services.errors import InputError
from services.settings.algorithm import DepthSettings


def is_probe_step(step: int, warmup_steps: int, probe_interval: int) -> bool:
    """probe_k = (k <= K_warm) or (k mod r_probe == 0)."""
    return step <= warmup_steps or step % probe_interval == 0


def applied_depth(h_bar: float, h_min: int, h_max: int) -> int:
    """H_hat = clip(round(H_bar) + 1, H_min, H_max)."""
    return min(max(round(h_bar) + 1, h_min), h_max)


def efficiency_centroid(kl_per_turn: Sequence[float], survivors: Sequence[int], eps: float) -> float:
    """sum_t t q_t with q_t = m_t / (sum_j m_j + eps), m_t = [K_t]_+ n_t / n_0 (0.0 when all m_t = 0)."""
    n0 = survivors[0]
    if n0 <= 0:
        raise InputError("survivors[0] must be positive to normalise survivor probabilities")
    mass = [max(k, 0.0) * n / n0 for k, n in zip(kl_per_turn, survivors, strict=True)]
    total = sum(mass) + eps
    return sum(t * m for t, m in enumerate(mass)) / total


def efficiency_horizon(kl_per_turn: Sequence[float], survivors: Sequence[int], eps: float) -> int:
    """H_eff = round(survivor-weighted KL centroid)."""
    return round(efficiency_centroid(kl_per_turn, survivors, eps))


def final_turns_from_survivors(survivors: Sequence[int]) -> list[int]:
    """0-based final-turn index of every trajectory, recovered from non-increasing survivor counts."""
    finals: list[int] = []
    for t, n in enumerate(survivors):
        after = survivors[t + 1] if t + 1 < len(survivors) else 0
        if after > n:
            raise InputError(
                f"survivors must be non-increasing to derive final turns (turn {t + 1}: {after} > {n})"
            )
        finals.extend([t] * (n - after))
    return finals


def coverage_horizon(final_turns: Sequence[int], quantile: float) -> int:
    """H_cov = min{H : F(H) >= p}, F the empirical CDF of the final-turn indices."""
    if not final_turns:
        raise InputError("coverage horizon needs at least one trajectory")
    counts = Counter(final_turns)
    n = len(final_turns)
    below = 0
    for h in sorted(counts):
        below += counts[h]
        # count/n is correctly rounded, so an exact tie with p (e.g. 8/10 vs 0.8) compares equal.
        if below / n >= quantile:
            return h
    return max(counts)


def initial_state(settings: DepthSettings) -> DepthState:
    """H_bar_0 = H_max, H_cov = 0, nothing probed yet."""
    return DepthState(step=0, h_bar=float(settings.max), h_cov=0, h_eff=None, h_ctrl=None)


def coverage_source(stats: ProbeStats, use_success: bool) -> list[int]:
    """Final-turn indices of the trajectories whose CDF bounds the depth."""
    return list(stats.success_turns) if use_success else final_turns_from_survivors(stats.survivors)


def plan_basis_step(k: int, lag: int) -> int:
    """The step whose state plans step k under staleness ``lag``: max(k-1-lag, 0)."""
    if lag < 0:
        raise InputError(f"staleness must be >= 0, got {lag}")
    return max(k - 1 - lag, 0)


def step(
    state: DepthState,
    k: int,
    stats: ProbeStats | None,
    settings: DepthSettings,
    basis: DepthState | None = None,
) -> StepDecision:
    """Run step k of Algorithm 1 from the state after step k-1; ``stats`` is the probe batch (probe steps).

    ``basis``: the state step k's plan was made from under staleness (the state after step k-1-s,
    recorded as ``planned_from``); None: ``state`` itself, the synchronous rule.
    """
    if k != state.step + 1:
        raise InputError(f"step {k} does not follow the controller's last step {state.step}")
    if basis is not None and basis.step > state.step:
        raise InputError(f"step {k} cannot be planned from step {basis.step}, after step {state.step}")
    probe = is_probe_step(k, settings.warmup_steps, settings.probe_interval)
    h_hat = applied_depth((basis or state).h_bar, settings.min, settings.max)
    h_roll = settings.max if probe else h_hat
    h_bar, h_cov, h_eff, h_ctrl = state.h_bar, state.h_cov, state.h_eff, state.h_ctrl
    if probe:
        if stats is None:
            raise InputError(f"step {k} is a probe step but no probe statistics were given")
        h_eff = efficiency_horizon(stats.kl_per_turn, stats.survivors, settings.eps)
        source = coverage_source(stats, settings.use_success)
        if len(source) >= settings.min_cov_traj:
            h_cov = coverage_horizon(source, settings.coverage_quantile)
        h_ctrl = max(h_eff, h_cov)
        h_bar = (1.0 - settings.ema_alpha) * state.h_bar + settings.ema_alpha * h_ctrl
    return StepDecision(
        step=k,
        probe=probe,
        h_roll=h_roll,
        h_hat=h_hat,
        h_bar=h_bar,
        h_eff=h_eff,
        h_cov=h_cov,
        h_ctrl=h_ctrl,
        planned_from=None if basis is None else basis.step,
    )


def state_after(decision: StepDecision) -> DepthState:
    """The state to carry into step k+1."""
    return DepthState(
        step=decision.step,
        h_bar=decision.h_bar,
        h_cov=decision.h_cov,
        h_eff=decision.h_eff,
        h_ctrl=decision.h_ctrl,
    )
