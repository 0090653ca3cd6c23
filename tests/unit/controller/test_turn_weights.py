"""Per-token weights: trajectory level, turn level with the reliability floor, and the blend."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.controller.turn_weights import (
    SourcePart,
    blended_weights,
    mixed_weights,
    reliability_floor,
    reliable_turns,
    segment_masses,
    survivors,
    trajectory_weights,
    turn_weights,
)
from services.errors import InputError


def turn_mass(turn_tokens, weights):
    masses = segment_masses(turn_tokens, weights)
    depth = max(len(r) for r in turn_tokens)
    return [sum(row[t] for row in masses if len(row) > t) for t in range(depth)]


def test_reliability_floor_uses_exact_decimal():
    assert reliability_floor(64, 8, 0.15) == 10  # ceil(9.6)
    assert reliability_floor(20, 1, 0.15) == 3  # exactly 3.0, not 3.0000000000000004
    assert reliability_floor(100, 1, 0.07) == 7
    assert reliability_floor(10, 8, 0.15) == 8


def test_trajectory_level_is_seq_mean_token_mean():
    w = trajectory_weights([[2, 2], [1], [0, 0]])
    # two trajectories with tokens -> each has mass 1/2, spread over its tokens
    assert w == [[1 / 8, 1 / 8], [1 / 2], [0.0, 0.0]]


def test_turn_level_hand_example():
    tt = [[2, 3], [4, 1], [1]]
    # n_min = 2: turn 0 (3 survivors) and turn 1 (2 survivors) reliable; each gets mass 1/2
    w = turn_weights(tt, n_min=2)
    assert turn_mass(tt, w) == pytest.approx([0.5, 0.5])
    # inside turn 1 both segments get 1/4, spread over their tokens
    assert w[0][1] == pytest.approx(0.25 / 3) and w[1][1] == pytest.approx(0.25 / 1)


def test_unreliable_turns_keep_trajectory_weight():
    tt = [[2, 3], [4, 1], [1]]
    traj = trajectory_weights(tt)
    w = turn_weights(tt, n_min=3)  # only turn 0 reliable
    assert w[0][1] == traj[0][1] and w[1][1] == traj[1][1]
    assert sum(map(sum, segment_masses(tt, w))) == pytest.approx(1.0)


def test_no_reliable_turn_falls_back_to_trajectory_level():
    tt = [[2, 3], [4]]
    assert turn_weights(tt, n_min=5) == trajectory_weights(tt)


def test_bad_batches_are_rejected():
    with pytest.raises(InputError, match="empty batch"):
        trajectory_weights([])
    with pytest.raises(InputError, match="negative"):
        trajectory_weights([[1, -1]])
    with pytest.raises(InputError, match="no supervised tokens"):
        trajectory_weights([[0, 0]])
    with pytest.raises(InputError, match="alpha"):
        blended_weights([[1]], 1.5, 1, 0.1)


batches = st.lists(st.lists(st.integers(0, 30), min_size=1, max_size=10), min_size=1, max_size=24).filter(
    lambda b: sum(map(sum, b)) > 0
)


@settings(max_examples=300, deadline=None)
@given(batches, st.floats(0.0, 1.0), st.integers(1, 10), st.sampled_from([0.0, 0.15, 0.3]))
def test_blended_weights_sum_to_one_and_are_nonnegative(tt, alpha, floor, frac):
    w = blended_weights(tt, alpha, floor, frac)
    assert sum(map(sum, segment_masses(tt, w))) == pytest.approx(1.0)
    assert all(x >= 0.0 for row in w for x in row)


@settings(max_examples=200, deadline=None)
@given(batches, st.integers(1, 10), st.sampled_from([0.0, 0.15]))
def test_alpha_zero_is_trajectory_level(tt, floor, frac):
    assert blended_weights(tt, 0.0, floor, frac) == trajectory_weights(tt)


@settings(max_examples=300, deadline=None)
@given(batches, st.integers(1, 10), st.sampled_from([0.0, 0.15, 0.3]))
def test_alpha_one_gives_equal_mass_to_every_reliable_turn(tt, floor, frac):
    n_min = reliability_floor(len(tt), floor, frac)
    reliable = reliable_turns(tt, n_min)
    mass = turn_mass(tt, blended_weights(tt, 1.0, floor, frac))
    traj_mass = turn_mass(tt, trajectory_weights(tt))
    if reliable:
        assert max(mass[t] for t in reliable) == pytest.approx(min(mass[t] for t in reliable))
    for t in range(len(mass)):
        if t not in reliable:
            assert mass[t] == pytest.approx(traj_mass[t])  # unreliable turns are not amplified
    assert all(survivors(tt)[t] >= n_min for t in reliable)


@settings(max_examples=200, deadline=None)
@given(batches, st.floats(0.0, 1.0))
def test_blend_is_linear_in_alpha(tt, alpha):
    w0, w1 = blended_weights(tt, 0.0, 2, 0.1), blended_weights(tt, 1.0, 2, 0.1)
    wa = blended_weights(tt, alpha, 2, 0.1)
    for r0, r1, ra in zip(w0, w1, wa, strict=True):
        for a, b, c in zip(r0, r1, ra, strict=True):
            assert c == pytest.approx((1 - alpha) * a + alpha * b, abs=1e-12)


def test_one_source_with_the_whole_batch_gives_todays_weights_exactly():
    rows = [[3, 2, 5], [4], [1, 1, 1], [2, 2], [6, 1]]
    for alpha in (0.0, 0.3, 1.0):
        whole = SourcePart(range(len(rows)), share=1.0, alpha=alpha, min_floor=2, min_frac=0.15)
        assert mixed_weights(rows, [whole]) == blended_weights(rows, alpha, 2, 0.15)


def test_each_source_is_blended_on_its_own_part_and_carries_its_share():
    rows = [[3, 2, 5], [4], [1, 1, 1], [2, 2], [6, 1]]
    household = SourcePart([0, 2, 4], share=0.6, alpha=1.0, min_floor=2, min_frac=0.0)
    search = SourcePart([1, 3], share=0.4, alpha=0.0, min_floor=2, min_frac=0.0)
    weights = mixed_weights(rows, [household, search])
    masses = segment_masses(rows, weights)
    assert math.isclose(sum(sum(masses[i]) for i in (0, 2, 4)), 0.6)
    assert math.isclose(sum(sum(masses[i]) for i in (1, 3)), 0.4)
    # household's part alone: turn level over its own survivors (3, 3, 2 reach turns 0, 1, 2)
    alone = blended_weights([rows[0], rows[2], rows[4]], 1.0, 2, 0.0)
    assert weights[2] == pytest.approx([0.6 * w for w in alone[1]])
    # search's part: trajectory level, 1/(2 N_b) scaled by 0.4
    assert weights[1] == pytest.approx([0.4 / (2 * 4)])


def test_a_source_absent_from_the_batch_gives_its_share_to_the_others():
    rows = [[3, 2], [4]]
    present = SourcePart([0, 1], share=0.5, alpha=0.0, min_floor=1, min_frac=0.0)
    absent = SourcePart([], share=0.5, alpha=0.0, min_floor=1, min_frac=0.0)
    assert mixed_weights(rows, [present, absent]) == blended_weights(rows, 0.0, 1, 0.0)


def test_parts_must_cover_the_batch_once():
    with pytest.raises(InputError, match="cover the 2 trajectories once each"):
        mixed_weights([[1], [2]], [SourcePart([0], share=1.0, alpha=0.0, min_floor=1, min_frac=0.0)])
