"""The depth controller against hand-worked examples and an independent transcription of Algorithm 1."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts.controller import ProbeStats
from services.controller import depth
from services.controller.replay import replay, unused_snapshot_steps
from services.errors import InputError
from services.settings.algorithm import DepthSettings


def test_probe_schedule_matches_algorithm_1():
    probes = [k for k in range(1, 26) if depth.is_probe_step(k, warmup_steps=3, probe_interval=8)]
    assert probes == [1, 2, 3, 8, 16, 24]


def test_applied_depth_rounds_half_to_even_and_clips():
    assert depth.applied_depth(2.5, 2, 50) == 3  # round(2.5) = 2 (half to even), +1
    assert depth.applied_depth(3.5, 2, 50) == 5  # round(3.5) = 4
    assert depth.applied_depth(0.2, 2, 50) == 2  # clipped up to H_min
    assert depth.applied_depth(80.0, 2, 50) == 50  # clipped down to H_max


def test_efficiency_centroid_hand_example():
    # m = [1*4/4, 2*2/4, 0*1/4] = [1, 1, 0]; centroid = (0*1 + 1*1) / 2 = 0.5 (minus eps effect)
    centroid = depth.efficiency_centroid([1.0, 2.0, -0.3], [4, 2, 1], eps=0.0)
    assert centroid == pytest.approx(0.5)
    # negative K_t is clipped to zero mass; eps shrinks the centroid a hair, so 0.5 rounds to 0
    assert depth.efficiency_horizon([1.0, 2.0, -0.3], [4, 2, 1], eps=1e-8) == 0
    assert depth.efficiency_horizon([0.0, 0.0], [3, 3], eps=1e-8) == 0


def test_coverage_horizon_is_inverted_cdf_quantile():
    # 10 successes; F(3) = 8/10 >= 0.8 exactly, so H_cov = 3 (an exact tie must count)
    finals = [0, 1, 1, 2, 2, 3, 3, 3, 5, 9]
    assert depth.coverage_horizon(finals, 0.8) == 3
    assert depth.coverage_horizon(finals, 0.81) == 5
    assert depth.coverage_horizon(finals, 1.0) == 9
    assert depth.coverage_horizon([4], 0.5) == 4


def test_final_turns_from_survivors():
    assert depth.final_turns_from_survivors([4, 3, 1]) == [0, 1, 1, 2]
    with pytest.raises(InputError, match="non-increasing"):
        depth.final_turns_from_survivors([2, 3])


def test_step_requires_stats_on_probe_steps_and_consecutive_steps():
    cfg = DepthSettings()
    state = depth.initial_state(cfg)
    with pytest.raises(InputError, match="probe step"):
        depth.step(state, 1, None, cfg)
    with pytest.raises(InputError, match="does not follow"):
        depth.step(state, 2, None, cfg)


def test_first_probe_updates_ema_from_h_max():
    cfg = DepthSettings(min_cov_traj=2)
    stats = ProbeStats(step=1, kl_per_turn=[2.0, 1.0, 1.0], survivors=[4, 4, 2], success_turns=[1, 2, 2])
    d = depth.step(depth.initial_state(cfg), 1, stats, cfg)
    # m = [2, 1, 0.5], centroid = (1 + 1) / 3.5 = 0.571 -> H_eff = 1; H_cov: F(1)=1/3, F(2)=1 -> 2
    assert (d.probe, d.h_roll, d.h_hat, d.h_eff, d.h_cov, d.h_ctrl) == (True, 50, 50, 1, 2, 2)
    assert d.h_bar == pytest.approx(0.7 * 50 + 0.3 * 2)


def test_h_cov_is_kept_when_too_few_successes():
    cfg = DepthSettings(warmup_steps=2, min_cov_traj=3)
    first = ProbeStats(step=1, kl_per_turn=[1.0, 1.0], survivors=[5, 5], success_turns=[1, 1, 1])
    second = ProbeStats(step=2, kl_per_turn=[1.0, 0.0], survivors=[5, 5], success_turns=[0])
    decisions = list(replay({1: first, 2: second}, 2, cfg))
    assert decisions[0].h_cov == 1
    assert decisions[1].h_cov == 1  # one success < min_cov_traj: stale H_cov stays
    assert decisions[1].h_eff == 0


def test_use_success_false_reads_cdf_from_survivors():
    cfg = DepthSettings(use_success=False, min_cov_traj=4, coverage_quantile=0.5)
    stats = ProbeStats(step=1, kl_per_turn=[1.0, 1.0, 1.0], survivors=[4, 3, 1], success_turns=[])
    d = depth.step(depth.initial_state(cfg), 1, stats, cfg)
    assert d.h_cov == 1  # finals [0, 1, 1, 2]: F(1) = 3/4 >= 0.5


def test_non_probe_steps_keep_state_and_roll_to_h_hat():
    cfg = DepthSettings(warmup_steps=1, probe_interval=4, ema_alpha=0.5, min=2, max=10, min_cov_traj=1)
    snap = ProbeStats(step=1, kl_per_turn=[1.0, 1.0, 1.0], survivors=[2, 2, 2], success_turns=[2, 2])
    snap4 = ProbeStats(step=4, kl_per_turn=[1.0], survivors=[2], success_turns=[0])
    out = list(replay({1: snap, 4: snap4}, 5, cfg))
    # step 1: H_eff = round(1.0) = 1, H_cov = 2, H_bar = 0.5*10 + 0.5*2 = 6
    assert [d.probe for d in out] == [True, False, False, True, False]
    assert out[0].h_bar == 6.0
    assert [d.h_hat for d in out[1:3]] == [7, 7]
    assert [d.h_roll for d in out] == [10, 7, 7, 10, 4]
    assert out[2].h_eff == 1 and out[2].h_ctrl == 2  # carried from the last probe
    # step 4: H_eff = 0, H_cov = 0, H_ctrl = 0, H_bar = 3 -> step 5 rolls to round(3)+1 = 4
    assert out[3].h_bar == 3.0 and out[4].h_hat == 4


def test_unused_snapshots_are_reported():
    cfg = DepthSettings(warmup_steps=1, probe_interval=4)
    snaps = {k: ProbeStats(step=k, kl_per_turn=[1.0], survivors=[1]) for k in (1, 2, 4, 9)}
    assert unused_snapshot_steps(snaps, 8, cfg) == [2, 9]


def reference_replay(snapshots, total, cfg):
    """Algorithm 1 transcribed literally, with numpy, independent of services.controller."""
    h_bar, h_cov, h_eff, h_ctrl, rows = float(cfg.max), 0, None, None, []
    for k in range(1, total + 1):
        h_hat = int(np.clip(round(h_bar) + 1, cfg.min, cfg.max))
        probe = k <= cfg.warmup_steps or k % cfg.probe_interval == 0
        if probe:
            s = snapshots[k]
            kl, n = np.array(s.kl_per_turn), np.array(s.survivors, dtype=float)
            m = np.maximum(kl, 0) * n / n[0]
            q = m / (m.sum() + cfg.eps)
            h_eff = round(float((np.arange(len(q)) * q).sum()))
            if cfg.use_success:
                finals = np.array(s.success_turns)
            else:
                finals = np.repeat(np.arange(len(n)), (n - np.append(n[1:], 0)).astype(int))
            if len(finals) >= cfg.min_cov_traj:
                h_cov = int(np.quantile(finals, cfg.coverage_quantile, method="inverted_cdf"))
            h_ctrl = max(h_eff, h_cov)
            h_bar = (1 - cfg.ema_alpha) * h_bar + cfg.ema_alpha * h_ctrl
        rows.append((k, probe, cfg.max if probe else h_hat, h_hat, h_bar, h_eff, h_cov, h_ctrl))
    return rows


@st.composite
def run_inputs(draw):
    cfg = DepthSettings(
        ema_alpha=draw(st.sampled_from([0.1, 0.3, 0.5, 1.0])),
        coverage_quantile=draw(st.sampled_from([0.4, 0.6, 0.8, 0.95])),
        min_cov_traj=draw(st.integers(1, 6)),
        min=draw(st.integers(1, 4)),
        max=draw(st.integers(4, 30)),
        probe_interval=draw(st.integers(1, 6)),
        warmup_steps=draw(st.integers(0, 4)),
        use_success=draw(st.booleans()),
    )
    total = draw(st.integers(1, 25))
    snaps = {}
    for k in range(1, total + 1):
        if not depth.is_probe_step(k, cfg.warmup_steps, cfg.probe_interval):
            continue
        turns = draw(st.integers(1, 12))
        survivors = sorted(draw(st.lists(st.integers(0, 20), min_size=turns, max_size=turns)), reverse=True)
        survivors[0] = max(survivors[0], 1)
        kl = draw(st.lists(st.floats(-0.5, 5.0), min_size=turns, max_size=turns))
        succ = draw(st.lists(st.integers(0, turns - 1), max_size=12))
        snaps[k] = ProbeStats(step=k, kl_per_turn=kl, survivors=survivors, success_turns=succ)
    return cfg, total, snaps


@settings(max_examples=300, deadline=None)
@given(run_inputs())
def test_replay_equals_independent_algorithm_1(inputs):
    cfg, total, snaps = inputs
    ours = [
        (d.step, d.probe, d.h_roll, d.h_hat, d.h_bar, d.h_eff, d.h_cov, d.h_ctrl)
        for d in replay(snaps, total, cfg)
    ]
    theirs = reference_replay(snaps, total, cfg)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a[:4] == b[:4] and a[5:] == b[5:]
        assert a[4] == pytest.approx(b[4], rel=1e-12, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(run_inputs())
def test_h_hat_stays_in_bounds_and_h_bar_is_convex_combination(inputs):
    cfg, total, snaps = inputs
    seen = [float(cfg.max)] + [
        float(max(max(s.success_turns, default=0), len(s.kl_per_turn))) for s in snaps.values()
    ]
    for d in replay(snaps, total, cfg):
        assert cfg.min <= d.h_hat <= cfg.max
        assert d.h_roll == (cfg.max if d.probe else d.h_hat)
        assert 0.0 <= d.h_bar <= max(seen) + 1e-9
