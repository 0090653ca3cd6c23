"""Bad requests become InputErrors that name the problem."""

import pickle

import numpy as np
import pytest

from services.contracts.teacher import TeacherContext
from services.errors import InputError
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.validation import SequenceTooLongError, TeacherLimits, validate_rows

LIMITS = TeacherLimits(vocab_size=100, max_context=32, token_budget=64, max_top_k=100)


def row(ids, positions):
    return ScoreRow(np.asarray(ids, dtype=np.int64), np.asarray(positions, dtype=np.int64))


def test_a_good_request_passes():
    validate_rows([row([1, 2, 3], [1, 2]), row(list(range(32)), [31])], 100, LIMITS)


@pytest.mark.parametrize(
    ("rows", "top_k", "message"),
    [
        ([], 5, "request has no sequences"),
        ([row([1, 2], [1])], 0, r"top_k must be in \[1, 100\] \(the teacher's vocabulary\), got 0"),
        ([row([1, 2], [1])], 101, "got 101"),
        (
            [row([1, 2], [1]), row([1, 100, 3], [1])],
            5,
            r"sequence 1: token id 100 at index 1 is outside .*\[0, 100\)",
        ),
        ([row([1, -4, 3], [1])], 5, "sequence 0: token id -4 at index 1"),
        ([row([1, 2, 3], [3])], 5, r"sequence 0: position 3 is outside \[1, 3\)"),
        ([row([1, 2, 3], [0])], 5, r"position 0 is outside \[1, 3\)"),
        ([row([1, 2, 3], [])], 5, "sequence 0: no positions to score"),
        ([row([1], [])], 5, "needs at least 2 tokens, got 1"),
        ([row(list(range(33)), [1])], 5, "sequence 0: 33 tokens exceed the teacher's context of 32"),
    ],
)
def test_bad_requests_name_the_problem(rows, top_k, message):
    with pytest.raises(InputError, match=message):
        validate_rows(rows, top_k, LIMITS)


def test_a_token_budget_below_the_context_is_named_as_the_cause():
    limits = TeacherLimits(vocab_size=100, max_context=128, token_budget=16, max_top_k=100)
    with pytest.raises(InputError, match=r"17 tokens exceed teacher\.token_budget = 16"):
        validate_rows([row([1] * 17, [1])], 5, limits)


def test_an_engine_cap_on_top_k_is_named():
    limits = TeacherLimits(vocab_size=100, max_context=32, token_budget=64, max_top_k=20)
    with pytest.raises(InputError, match=r"\[1, 20\] \(the engine's log-prob cap\), got 21"):
        validate_rows([row([1, 2], [1])], 21, limits)


def test_a_sequence_too_long_names_the_teachers_limits_and_survives_pickling():
    """The caller learns the replica's limit from the refusal (a teacher restarted with a lower
    context), across Ray's process boundary."""
    with pytest.raises(SequenceTooLongError) as caught:
        validate_rows([row([1, 2], [1]), row(list(range(40)), [1])], 5, LIMITS)
    error = caught.value
    assert (error.index, error.length, error.context) == (1, 40, LIMITS.context)
    assert error.context == TeacherContext(max_context=32, token_budget=64) and error.context.max_length == 32
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, InputError) and str(again) == str(error) == (
        "sequence 1: 40 tokens exceed the teacher's context of 32"
    )
    assert again.context == error.context
    budget = TeacherContext(max_context=128, token_budget=16)
    assert budget.max_length == 16 and budget.limit_text.startswith("teacher.token_budget = 16")
