import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from services.controller.blend import blend_alpha
from services.errors import InputError


def test_linear_schedule_default_window():
    assert [blend_alpha(k, 4, 0.0, 1.0) for k in range(0, 5)] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_window_clips_before_start_and_after_end():
    assert blend_alpha(1, 10, 0.2, 0.6) == 0.0
    assert blend_alpha(4, 10, 0.2, 0.6) == pytest.approx(0.5)
    assert blend_alpha(7, 10, 0.2, 0.6) == 1.0


def test_bad_window_is_an_error():
    with pytest.raises(InputError, match="greater than start"):
        blend_alpha(1, 10, 0.5, 0.5)
    with pytest.raises(InputError, match="total_steps"):
        blend_alpha(1, 0, 0.0, 1.0)


@given(st.integers(0, 500), st.integers(1, 500), st.floats(0, 0.9), st.floats(0.05, 1.0))
def test_alpha_in_unit_interval_and_monotone(k, total, s, width):
    e = min(s + width, 1.0)
    assume(e > s)
    a, b = blend_alpha(k, total, s, e), blend_alpha(k + 1, total, s, e)
    assert 0.0 <= a <= b <= 1.0
