from services.diagnostics.reliable_prefix import (
    reliable_prefix_length,
    support_fractions,
    supported,
    thirds,
)


def test_support_needs_floor_and_fraction_of_turn_zero():
    assert supported(8, 80, 8, 0.1)
    assert not supported(7, 20, 8, 0.1)  # below the survivor floor
    assert not supported(8, 100, 8, 0.1)  # below 10% of turn 0
    assert supported(3, 30, 3, 0.1)  # exact tie 3/30 == 10% counts


def test_prefix_is_longest_leading_run_supported_in_enough_steps():
    steps = [[20, 10, 8, 3], [20, 9, 7, 2], [20, 12, 9, 1]]
    assert support_fractions(
        steps,
        8,
        0.1,
    ) == [1.0, 1.0, 2 / 3, 0.0]
    assert reliable_prefix_length(steps, 8, 0.1, 0.6) == 3
    assert reliable_prefix_length(steps, 8, 0.1, 0.7) == 2


def test_prefix_stops_at_first_gap_even_if_deeper_turns_pass():
    steps = [[10, 2, 9], [10, 2, 9]]
    assert reliable_prefix_length(steps, 8, 0.1, 0.6) == 1


def test_steps_missing_a_turn_have_zero_survivors_there():
    steps = [[10, 9], [10], [10, 9]]
    assert support_fractions(steps, 8, 0.1) == [1.0, 2 / 3]


def test_thirds():
    assert thirds(0) == (range(0, 0), range(0, 0))
    assert (list(thirds(1)[0]), list(thirds(1)[1])) == ([0], [0])
    assert (list(thirds(2)[0]), list(thirds(2)[1])) == ([0], [1])
    assert (list(thirds(7)[0]), list(thirds(7)[1])) == ([0, 1, 2], [4, 5, 6])
    assert (list(thirds(9)[0]), list(thirds(9)[1])) == ([0, 1, 2], [6, 7, 8])


def test_zero_thresholds_count_missing_turns_as_supported():
    # The rule read literally: n_t = 0 >= 0 survivors and 0/n_0 >= 0.
    assert support_fractions([[3, 1], [2]], 0, 0.0) == [1.0, 1.0]
