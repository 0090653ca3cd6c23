import pytest

from services.diagnostics.token_kl import (
    ResponseToken,
    call_offset,
    empty_classes,
    kl_by_class,
    response_tokens,
)

# One character per token id: a decoder as plain as the test needs.
VOCAB = dict(enumerate(sorted(set("abcdefghx<>_tool call"))))


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def encode(text: str) -> list[int]:
    inverse = {c: i for i, c in VOCAB.items()}
    return [inverse[c] for c in text]


def test_the_call_starts_at_the_token_that_reaches_the_tag():
    ids = encode("ab<tool_call>c")
    assert call_offset(ids, decode) == 2
    assert call_offset(encode("abc"), decode) == 3


def test_tokens_new_against_the_response_before_are_novel_and_the_call_is_marked():
    first, second = encode("abcd<tool_call>e"), encode("abxd<tool_call>f")
    prompt = encode("hh")
    token_ids = prompt + first + encode("g") + second
    start1 = len(prompt)
    start2 = start1 + len(first) + 1
    tokens = response_tokens(
        token_ids, [(start1, start1 + len(first)), (start2, start2 + len(second))], decode
    )
    assert len(tokens) == len(first) + len(second)
    # the first response has no response before it: every token is new
    assert all(t.novel for t in tokens[: len(first)])
    novel_second = [t.position - start2 for t in tokens[len(first) :] if t.novel]
    assert novel_second == [2, len(second) - 1]  # 'x' replaced 'c', 'f' replaced 'e'
    in_call = [t.position - start2 for t in tokens[len(first) :] if t.in_call]
    assert in_call == list(range(4, len(second)))


def test_a_span_outside_the_trajectory_is_refused():
    with pytest.raises(ValueError, match=r"response span \[3, 9\) is outside the 5 token ids"):
        response_tokens(encode("abcde"), [(3, 9)], decode)


def test_each_token_adds_the_kl_of_its_prediction_to_its_classes():
    tokens = [ResponseToken(2, True, False), ResponseToken(3, False, True), ResponseToken(4, False, True)]
    kl_N = [9.0, 0.5, 0.25, 1.0, 7.0]  # kl_N[p] predicts token p + 1; kl_N[4] predicts nothing here
    sums = empty_classes()
    kl_by_class(kl_N, tokens, sums)
    assert (sums["novel"].total, sums["novel"].tokens) == (0.5, 1)
    assert (sums["copied"].total, sums["copied"].tokens) == (1.25, 2)
    assert (sums["call"].total, sums["call"].tokens) == (1.25, 2)
    assert sums["all"].mean == pytest.approx(1.75 / 3)
    assert empty_classes()["all"].mean == 0.0
