"""Prompt log-probs of an OpenAI-compatible answer into our top-K rows, and our scores back out."""

import math

import numpy as np
import pytest

from services.contracts.completions import CompletionChoice, CompletionResponse, PromptLogprob
from services.teacher_scorer.completions_codec import (
    EndpointAnswerError,
    completion_json,
    completion_request,
    rows_from_prompts,
    scores_from_completion,
    topk_tail_entropy,
    truncated_prompts,
)
from services.teacher_scorer.engine import RowScores, ScoreRow


def _row(ids, positions):
    return ScoreRow(np.asarray(ids, dtype=np.int64), np.asarray(positions, dtype=np.int64))


def _entries(pairs):
    return {t: PromptLogprob(logprob=lp, rank=r) for t, lp, r in pairs}


def _answer(prompt_logprobs, prompt_token_ids=None, index=0):
    """The JSON answer of a server (what the client reads)."""
    choice = CompletionChoice(index=index, prompt_logprobs=prompt_logprobs, prompt_token_ids=prompt_token_ids)
    return CompletionResponse(model="teacher", choices=[choice]).model_dump_json()


# Prompt [5, 7, 9]: position 1 has 3 top entries (7 among them), position 2 has 3 (9 outside, rank 6).
POSITION_1 = _entries([(3, -1.25, 2), (7, -0.5, 1), (2, -2.5, 3)])
POSITION_2 = _entries([(4, -0.25, 1), (8, -2.0, 2), (1, -3.0, 3), (9, -3.5, 6)])


def test_request_scores_whole_sequences_at_top_k():
    request = completion_request([_row([5, 7, 9], [2]), _row([1, 2], [1])], 20, "teacher")
    assert request.prompts == [[5, 7, 9], [1, 2]]
    assert (request.prompt_logprobs, request.max_tokens, request.model) == (20, 1, "teacher")


def test_rows_read_the_scored_positions_sorted_descending_and_skip_the_first_none(codec):
    answer = _answer([None, POSITION_1, POSITION_2], [5, 7, 9])
    (scores,) = scores_from_completion(answer, [_row([5, 7, 9], [1, 2])], 3, codec)
    assert scores.top_ids_P_K.tolist() == [[7, 3, 2], [4, 8, 1]]
    np.testing.assert_array_equal(scores.top_logprobs_P_K, [[-0.5, -1.25, -2.5], [-0.25, -2.0, -3.0]])
    np.testing.assert_array_equal(scores.token_logprob_P, [-0.5, -3.5])
    assert scores.entropy_P[0] == pytest.approx(topk_tail_entropy(np.array([-0.5, -1.25, -2.5])), abs=1e-6)


def test_k_below_the_answers_count_keeps_the_largest(codec):
    answer = _answer([None, POSITION_1, POSITION_2])
    (scores,) = scores_from_completion(answer, [_row([5, 7, 9], [2])], 2, codec)
    # Position 2 answered 4 entries (3 top + the token there); K = 2 keeps the 2 largest.
    assert scores.top_ids_P_K.tolist() == [[4, 8]]
    np.testing.assert_array_equal(scores.token_logprob_P, [-3.5])


def test_the_first_position_none_is_an_error_only_if_asked_for(codec):
    answer = _answer([None, None, POSITION_2])
    with pytest.raises(EndpointAnswerError, match="position 1: no prompt log-probs"):
        scores_from_completion(answer, [_row([5, 7, 9], [1, 2])], 2, codec)


def test_a_missing_scored_token_is_an_error_naming_it(codec):
    answer = _answer([None, POSITION_1, _entries([(4, -0.25, 1), (8, -2.0, 2)])])
    with pytest.raises(EndpointAnswerError, match=r"position 2: the log-prob of the token there \(9\)"):
        scores_from_completion(answer, [_row([5, 7, 9], [2])], 2, codec)


def test_fewer_log_probs_than_top_k_is_an_error_naming_both(codec):
    answer = _answer([None, POSITION_1, POSITION_2])
    with pytest.raises(EndpointAnswerError, match="3 log-probs, fewer than top_k = 4"):
        scores_from_completion(answer, [_row([5, 7, 9], [1])], 4, codec)


def test_other_tokens_than_sent_is_a_tokenizer_error(codec):
    answer = _answer([None, POSITION_1, POSITION_2], [5, 7, 10])
    with pytest.raises(EndpointAnswerError, match=r"first difference at 2.*tokenizer"):
        scores_from_completion(answer, [_row([5, 7, 9], [1])], 2, codec)


def test_a_wrong_number_of_entries_or_choices_is_an_error(codec):
    with pytest.raises(EndpointAnswerError, match="2 prompt_logprobs entries for 3 tokens"):
        scores_from_completion(_answer([None, POSITION_1]), [_row([5, 7, 9], [1])], 2, codec)
    with pytest.raises(EndpointAnswerError, match=r"choices \[1\] for 1 prompts"):
        scores_from_completion(
            _answer([None, POSITION_1, POSITION_2], index=1), [_row([5, 7, 9], [1])], 2, codec
        )


def test_topk_tail_entropy_is_exact_when_the_top_k_holds_all_mass():
    p = np.array([0.5, 0.25, 0.25])
    assert topk_tail_entropy(np.log(p)) == pytest.approx(-(p * np.log(p)).sum(), abs=1e-12)
    # Half the mass outside the top-1: the tail bucket contributes -0.5 log 0.5.
    assert topk_tail_entropy(np.log([0.5])) == pytest.approx(math.log(2), abs=1e-12)


def test_our_scores_out_and_back_in_are_the_same_rows(codec):
    """completion_json then scores_from_completion gives back our top-K exactly, and the answer is a
    CompletionResponse."""
    rng = np.random.default_rng(0)
    rows = [_row(rng.integers(0, 50, size=n).tolist(), list(range(1, n))) for n in (4, 6)]
    k = 3
    top_ids = [np.stack([rng.permutation(50)[:k] for _ in range(len(r.positions_P))]) for r in rows]
    top_lps = [
        np.sort(rng.uniform(-6, -0.1, size=(len(r.positions_P), k)).astype(np.float32))[:, ::-1] for r in rows
    ]
    token_lps = [np.full(len(r.positions_P), -7.0, dtype=np.float32) for r in rows]
    ours = [RowScores(i, lp, t, t) for i, lp, t in zip(top_ids, top_lps, token_lps, strict=True)]
    request = completion_request(rows, k, "teacher")
    scored = rows_from_prompts(request.prompts)
    assert [s.positions_P.tolist() for s in scored] == [list(range(1, 4)), list(range(1, 6))]
    assert [s.token_ids_T.tolist() for s in scored] == request.prompts
    assert not any(s.wants_entropy for s in scored)
    answer = completion_json(request.prompts, ours, "teacher", codec)
    parsed = CompletionResponse.model_validate_json(answer)
    assert [c.prompt_token_ids for c in parsed.choices] == request.prompts
    assert parsed.usage is not None and parsed.usage.prompt_tokens == 10
    back = scores_from_completion(answer, rows, k, codec)
    for row, mine, theirs in zip(rows, ours, back, strict=True):
        np.testing.assert_array_equal(theirs.top_ids_P_K, mine.top_ids_P_K)
        np.testing.assert_array_equal(theirs.top_logprobs_P_K, mine.top_logprobs_P_K)
        # The token there: its own entry where outside the top-K, else the top-K's entry for it.
        for ids_K, lps_K, token, token_lp in zip(
            mine.top_ids_P_K,
            mine.top_logprobs_P_K,
            row.token_ids_T[row.positions_P],
            theirs.token_logprob_P,
            strict=True,
        ):
            want = lps_K[list(ids_K).index(token)] if token in ids_K else -7.0
            assert token_lp == want


def test_a_malformed_answer_is_an_error_naming_what_and_where(codec):
    row = [_row([5, 7, 9], [1])]
    with pytest.raises(EndpointAnswerError, match="not JSON"):
        scores_from_completion(b"<html>502</html>", row, 2, codec)
    with pytest.raises(EndpointAnswerError, match="no list of choices"):
        scores_from_completion(b'{"choices": {"0": 1}}', row, 2, codec)
    with pytest.raises(EndpointAnswerError, match=r"choices \['0'\] for 1 prompts"):
        scores_from_completion(b'{"choices": [{"index": "0"}]}', row, 2, codec)
    bad_entry = b'{"choices": [{"index": 0, "prompt_logprobs": [null, {"7": -0.5}, null]}]}'
    with pytest.raises(EndpointAnswerError, match=r"position 1: not a map of token ids to \{'logprob'"):
        scores_from_completion(bad_entry, row, 2, codec)
    bad_id = b'{"choices": [{"index": 0, "prompt_logprobs": [null, {"seven": {"logprob": -0.5}}, null]}]}'
    with pytest.raises(EndpointAnswerError, match="position 1: not a map of token ids"):
        scores_from_completion(bad_id, row, 1, codec)
    text_lp = b'{"choices": [{"index": 0, "prompt_logprobs": [null, {"7": {"logprob": "-0.5"}}, null]}]}'
    with pytest.raises(EndpointAnswerError, match="position 1: a log-prob that is not a number"):
        scores_from_completion(text_lp, row, 1, codec)
    with pytest.raises(EndpointAnswerError, match="not JSON"):  # NaN is not JSON
        scores_from_completion(
            b'{"choices": [{"index": 0, "prompt_logprobs": [null, {"7": {"logprob": NaN}}, null]}]}',
            row,
            1,
            codec,
        )
    huge = b'{"choices": [{"index": 0, "prompt_logprobs": [null, {"7": {"logprob": -1e999}}, null]}]}'
    with pytest.raises(EndpointAnswerError, match="prompt 0: a log-prob that is not finite"):
        scores_from_completion(huge, row, 1, codec)


def test_only_the_scored_positions_are_read(codec):
    """A position no row scores may hold anything a server sends (it is never converted)."""
    odd = {"1": "unread"}
    body = CompletionResponse.model_construct(
        choices=[CompletionChoice.model_construct(index=0, prompt_logprobs=[None, odd, POSITION_2])]
    )
    (scores,) = scores_from_completion(body.model_dump_json(warnings=False), [_row([5, 7, 9], [2])], 2, codec)
    assert scores.top_ids_P_K.tolist() == [[4, 8]]


def test_a_token_ranked_below_top_k_never_fills_a_top_k_place(codec):
    """Position 2 answers its top 3 and the token there (9, rank 6): at K = 4 the fourth place is
    unknown, not token 9's; with our app's null rank the token there stays eligible."""
    answer = _answer([None, POSITION_1, POSITION_2])
    with pytest.raises(EndpointAnswerError, match="position 2: 3 log-probs, fewer than top_k = 4"):
        scores_from_completion(answer, [_row([5, 7, 9], [2])], 4, codec)
    unranked = _entries([(4, -0.25, 1), (8, -2.0, 2), (1, -3.0, 3), (9, -3.5, None)])
    (scores,) = scores_from_completion(
        _answer([None, POSITION_1, unranked]), [_row([5, 7, 9], [2])], 4, codec
    )
    assert scores.top_ids_P_K.tolist() == [[4, 8, 1, 9]]


def test_a_negative_token_id_is_an_error_naming_it(codec):
    answer = _answer([None, POSITION_1, POSITION_2]).replace('"2":', '"-2":')
    with pytest.raises(EndpointAnswerError, match=r"position 1: a negative token id \(-2\)"):
        scores_from_completion(answer, [_row([5, 7, 9], [1])], 3, codec)


def test_choices_out_of_order_map_to_their_prompts(codec):
    rows = [_row([5, 7, 9], [2]), _row([5, 7], [1])]
    first = CompletionChoice(index=0, prompt_logprobs=[None, POSITION_1, POSITION_2])
    second = CompletionChoice(index=1, prompt_logprobs=[None, POSITION_1])
    body = CompletionResponse(model="teacher", choices=[second, first]).model_dump_json()
    got = scores_from_completion(body, rows, 3, codec)
    assert [s.top_ids_P_K.tolist() for s in got] == [[[4, 8, 1]], [[7, 3, 2]]]
    duplicated = CompletionResponse(model="teacher", choices=[first, first]).model_dump_json()
    with pytest.raises(EndpointAnswerError, match=r"choices \[0, 0\] for 2 prompts"):
        scores_from_completion(duplicated, rows, 3, codec)


@pytest.mark.parametrize(
    ("keep", "side", "kept"),
    [
        (None, None, [[1, 2, 3, 4, 5], [6, 7]]),
        (3, None, [[3, 4, 5], [6, 7]]),
        (3, "left", [[3, 4, 5], [6, 7]]),
        (3, "right", [[1, 2, 3], [6, 7]]),
        (-1, None, [[2, 3, 4, 5], [6, 7]]),
        (-1, "right", [[1, 2, 3, 4], [6, 7]]),
        (0, None, [[], []]),
        (0, "right", [[], []]),
    ],
)
def test_truncated_prompts_keep_what_vllms_truncate_prompt_tokens_keeps(keep, side, kept):
    assert truncated_prompts([[1, 2, 3, 4, 5], [6, 7]], keep, side, longest=4) == kept
