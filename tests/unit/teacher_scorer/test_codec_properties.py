"""Property-based tests of the codec's compiled reader (completions_kernels.c) against the Python
reader: on arbitrary bytes, on answers of every shape a server could send, and on those answers
broken byte by byte, whatever the C reads it reads as Python does (bit for bit), and it never
crashes or raises. A bounded number of examples here, the same each run; bench/codec_fuzz.py runs
many more, new each time, against a build under AddressSanitizer and UBSan."""

import random

import pytest
from codec_answers import Answer, answers, arbitrary_bodies, assert_readers_agree, build_answer, mutated
from hypothesis import HealthCheck, given, settings

BOUNDED = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Python's float32 casts of log-probs past float32's range warn; the answer is refused all the same.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@BOUNDED
@given(answers())
def test_answers_of_every_shape_are_read_alike(codec_kernels_built, answer: Answer):
    assert_readers_agree(codec_kernels_built, answer)


@BOUNDED
@given(answers().flatmap(mutated))
def test_answers_broken_byte_by_byte_are_read_alike(codec_kernels_built, answer: Answer):
    assert_readers_agree(codec_kernels_built, answer)


@BOUNDED
@given(arbitrary_bodies())
def test_arbitrary_bytes_are_read_alike(codec_kernels_built, drawn: tuple[list[bytes], Answer]):
    """Bytes alone, after an answer's start, and runs of one fragment (``arbitrary_bodies``)."""
    bodies, answer = drawn
    for body in bodies:
        assert_readers_agree(codec_kernels_built, Answer(body, answer.rows, answer.top_k))


def test_well_formed_answers_are_read_by_the_c_not_left_to_python(codec_kernels_built):
    """The strategy exercises the C's reading, not only its refusals: of answers without oddities
    (decoded tokens with escapes and surrogate pairs, any key order and whitespace), the C reads
    every one the Python reader takes."""
    outcomes = []
    for seed in range(300):
        answer = build_answer(random.Random(seed), 0.0)
        outcomes.append(assert_readers_agree(codec_kernels_built, answer))
    assert sum(outcomes) >= 250, sum(outcomes)
