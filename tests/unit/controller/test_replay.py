"""Replay under staleness s: step k is planned from the state after step k-1-s; checked by hand."""

import pytest

from services.contracts.controller import ProbeStats
from services.controller.replay import replay
from services.errors import InputError
from services.settings.algorithm import DepthSettings

# H_min 2, H_max 10, probes at steps 1 (warm-up), 3 and 6, EMA weight 1/2, H_cov from one success.
SETTINGS = DepthSettings(
    min=2, max=10, ema_alpha=0.5, probe_interval=3, warmup_steps=1, min_cov_traj=1, coverage_quantile=0.8
)
# The KL mass sits on one turn and the one success ends there: H_eff = H_cov = H_ctrl = that turn,
# so H_bar_1 = (10 + 4) / 2 = 7, H_bar_3 = (7 + 2) / 2 = 4.5, H_bar_6 = (4.5 + 1) / 2 = 2.75 (H_cov 0).
SNAPSHOTS = {
    1: ProbeStats(step=1, kl_per_turn=[0, 0, 0, 0, 1], survivors=[1] * 5, success_turns=[4]),
    3: ProbeStats(step=3, kl_per_turn=[0, 0, 1], survivors=[1] * 3, success_turns=[2]),
    6: ProbeStats(step=6, kl_per_turn=[0, 1], survivors=[1] * 2, success_turns=[0]),
}
H_BAR = [7.0, 7.0, 4.5, 4.5, 4.5, 2.75]  # after steps 1..6, whatever the staleness


def decisions(lag):
    return list(replay(SNAPSHOTS, 6, SETTINGS, lag))


def test_synchronous_replay_plans_from_the_previous_step():
    out = decisions(0)
    assert [d.h_bar for d in out] == H_BAR
    # H_hat_k = clip(round(H_bar_{k-1}) + 1, 2, 10): H_bar_0 = 10, then 7, 7, 4.5 (rounds to 4), ...
    assert [d.h_hat for d in out] == [10, 8, 8, 5, 5, 5]
    assert [d.h_roll for d in out] == [10, 8, 10, 5, 5, 10]
    assert [d.planned_from for d in out] == [None] * 6
    assert "planned_from" not in out[0].model_dump()  # the synchronous lines are as before


def test_staleness_one_plans_from_two_steps_back():
    out = decisions(1)
    assert [d.h_bar for d in out] == H_BAR
    assert [d.planned_from for d in out] == [0, 0, 1, 2, 3, 4]
    # H_hat_k from H_bar_{k-2}: H_bar_0, H_bar_0, H_bar_1 = 7, H_bar_2 = 7, H_bar_3 = 4.5, H_bar_4 = 4.5
    assert [d.h_hat for d in out] == [10, 10, 8, 8, 5, 5]
    assert [d.h_roll for d in out] == [10, 10, 10, 8, 5, 10]
    assert [(d.h_eff, d.h_cov) for d in out] == [(4, 4), (4, 4), (2, 2), (2, 2), (2, 2), (1, 0)]


def test_staleness_two():
    out = decisions(2)
    assert [d.h_bar for d in out] == H_BAR
    assert [d.planned_from for d in out] == [0, 0, 0, 1, 2, 3]
    assert [d.h_hat for d in out] == [10, 10, 10, 8, 8, 5]
    assert out[1].model_dump()["planned_from"] == 0


def test_negative_staleness_is_refused():
    with pytest.raises(InputError, match="staleness must be >= 0, got -1"):
        decisions(-1)
