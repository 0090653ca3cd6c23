"""Conversions between OpenAI-compatible ``/v1/completions`` prompt log-probs and our top-K rows.

A row's position ``p`` scores token ``p`` given tokens ``[0, p)``; the server's
``prompt_logprobs[p]`` is exactly that distribution's top entries (plus the token at ``p``), so
positions map one to one and ``prompt_logprobs[0]`` (null) is never read.

The endpoint does not return the full-vocabulary entropy. It is estimated from what it returns,
treating the mass outside the top-K as one bucket, as the loss's tail bucket does:
``H ~= -sum_{j in S} p_j log p_j - p_tail log p_tail``, a lower bound of the true entropy that is
tight when the tail is small or flat-free.
"""

import functools
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pydantic_core

from services.contracts.completions import CompletionRequest
from services.errors import InputError, TurnOPDError
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.token_probe import first_difference

if TYPE_CHECKING:
    from services.teacher_scorer.completions_native import CodecKernels


class EndpointAnswerError(TurnOPDError, ValueError):
    """The endpoint's answer does not fit the request (missing positions, too few log-probs, other
    tokens than were sent)."""


def completion_request(rows: Sequence[ScoreRow], top_k: int, model: str | None) -> CompletionRequest:
    """One batched request scoring every position of each row at ``top_k``."""
    return CompletionRequest(
        model=model,
        prompt=[r.token_ids_T.tolist() for r in rows],
        prompt_logprobs=top_k,
        max_tokens=1,
        return_token_ids=True,
    )


def scores_from_completion(
    body: bytes | str, rows: Sequence[ScoreRow], top_k: int, kernels: "CodecKernels | None" = None
) -> list[RowScores]:
    """Our top-K rows from the endpoint's JSON answer to ``completion_request(rows, top_k, ...)``:
    read by the compiled ``kernels`` where given and they take the answer, else (and for the error
    saying what is wrong with it) in Python."""
    if kernels is not None and (scores := kernels.read(body, rows, top_k)) is not None:
        return scores
    return python_scores_from_completion(body, rows, top_k)


def python_scores_from_completion(body: bytes | str, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
    """``scores_from_completion`` in Python.

    Only the envelope and the positions the rows score are checked and converted: the answer holds
    K+1 entries at every position of every prompt, and most are never read (validating all of them
    as ``CompletionResponse`` cost more than the rest of the conversion; ``bench/teacher_throughput.py``).
    """
    try:
        answer = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise EndpointAnswerError(f"the endpoint's answer is not JSON ({exc})") from None
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise EndpointAnswerError("the endpoint's answer has no list of choices (objects)")
    indices = [c.get("index") for c in choices]
    if not all(type(i) is int for i in indices) or sorted(indices) != list(range(len(rows))):
        raise EndpointAnswerError(f"the endpoint answered choices {indices[:10]} for {len(rows)} prompts")
    by_index = sorted(choices, key=lambda c: c["index"])
    return [_row_scores(choice, row, top_k) for choice, row in zip(by_index, rows, strict=True)]


def _row_scores(choice: dict[str, Any], row: ScoreRow, top_k: int) -> RowScores:
    index = choice["index"]
    token_ids = row.token_ids_T.tolist()
    sent_back = choice.get("prompt_token_ids")
    if sent_back is not None and sent_back != token_ids:
        where = first_difference(sent_back, token_ids) if isinstance(sent_back, list) else "the start"
        raise EndpointAnswerError(
            f"prompt {index}: the endpoint scored other tokens than were sent (first difference at "
            f"{where}); it must take token ids as they are, with the student's tokenizer"
        )
    positions = choice.get("prompt_logprobs")
    if not isinstance(positions, list) or len(positions) != len(token_ids):
        got = len(positions) if isinstance(positions, list) else None
        raise EndpointAnswerError(
            f"prompt {index}: {got} prompt_logprobs entries for {len(token_ids)} tokens "
            "(was prompt_logprobs sent, and does the server support it?)"
        )
    n = len(row.positions_P)
    top_ids = np.empty((n, top_k), dtype=np.int64)
    top_lps = np.empty((n, top_k), dtype=np.float32)
    token_lp = np.empty(n, dtype=np.float32)
    for i, p in enumerate(row.positions_P.tolist()):
        where = f"prompt {index}, position {p}"
        logprob_of, below_k = _position_logprobs(positions[p], where, top_k)
        eligible = [kv for kv in logprob_of.items() if kv[0] not in below_k]
        ranked = sorted(eligible, key=lambda kv: (-kv[1], kv[0]))[:top_k]
        if len(ranked) < top_k:
            raise EndpointAnswerError(f"{where}: {len(eligible)} log-probs, fewer than top_k = {top_k}")
        actual = logprob_of.get(token_ids[p])
        if actual is None:
            raise EndpointAnswerError(
                f"{where}: the log-prob of the token there ({token_ids[p]}) is missing from the answer"
            )
        top_ids[i] = [token for token, _ in ranked]
        try:
            top_lps[i] = [lp for _, lp in ranked]
            token_lp[i] = actual
        except OverflowError:  # an integer past any float's range
            raise EndpointAnswerError(f"prompt {index}: a log-prob that is not finite") from None
    if not (np.isfinite(top_lps).all() and np.isfinite(token_lp).all()):
        raise EndpointAnswerError(f"prompt {index}: a log-prob that is not finite")
    return RowScores(top_ids, top_lps, token_lp, topk_tail_entropies(top_lps).astype(np.float32))


def _position_logprobs(entries: object, where: str, top_k: int) -> tuple[dict[int, float], set[int]]:
    """One position's ``{token id: log-prob}`` (ids come as JSON object keys, so as text), and the ids
    whose answered rank is below the top ``top_k`` (the token there can be one: it is answered
    whatever its rank, and must not fill a top-K place the server did not answer)."""
    if entries is None:
        raise EndpointAnswerError(f"{where}: no prompt log-probs")
    logprob_of: dict[int, float] = {}
    below_k: set[int] = set()
    try:
        for token, entry in entries.items():  # type: ignore[attr-defined]
            token_id = int(token)
            logprob_of[token_id] = entry["logprob"]
            rank = entry.get("rank")
            if type(rank) is int and rank > top_k:
                below_k.add(token_id)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise EndpointAnswerError(
            f"{where}: not a map of token ids to {{'logprob': ...}} ({type(exc).__name__}: {exc})"
        ) from None
    if not all(type(lp) is float or type(lp) is int for lp in logprob_of.values()):
        raise EndpointAnswerError(f"{where}: a log-prob that is not a number")
    if min(logprob_of, default=0) < 0:
        raise EndpointAnswerError(f"{where}: a negative token id ({min(logprob_of)})")
    return logprob_of, below_k


def topk_tail_entropy(top_logprobs_K: np.ndarray) -> float:
    """Entropy (nats) of the top-K plus one bucket holding the rest of the mass."""
    return float(topk_tail_entropies(np.asarray(top_logprobs_K)[None])[0])


def topk_tail_entropies(top_logprobs_P_K: np.ndarray) -> np.ndarray:
    """``topk_tail_entropy`` of every row at once (float64)."""
    lp = top_logprobs_P_K.astype(np.float64)
    p = np.exp(lp)
    head = -(p * lp).sum(-1)
    tail = 1.0 - p.sum(-1)
    has_tail = tail > 0.0
    safe = np.where(has_tail, tail, 1.0)
    return np.where(has_tail, head - safe * np.log(safe), head)


def rows_from_prompts(prompts: list[list[int]]) -> list[ScoreRow]:
    """Our rows scoring every position after the first of each prompt (the request's token ids, or
    its text as this server tokenised it). The answer carries no entropy, so the rows do not ask for
    it (the engine then skips its pass over the vocabulary)."""
    for index, prompt in enumerate(prompts):
        if len(prompt) < 2:
            raise InputError(
                f"prompt {index} is {len(prompt)} token(s); prompt log-probs need at least 2 (the first "
                "has nothing before it)"
            )
    return [
        ScoreRow(np.asarray(p, dtype=np.int64), np.arange(1, len(p), dtype=np.int64), wants_entropy=False)
        for p in prompts
    ]


def truncated_prompts(
    prompts: list[list[int]], keep: int | None, side: Literal["left", "right"] | None, longest: int
) -> list[list[int]]:
    """The prompts cut as vLLM's ``truncate_prompt_tokens = keep`` cuts them: to their last ``keep``
    tokens (side "left" or None: vLLM's default for generating models) or their first (side
    "right"); ``keep`` -1 keeps ``longest`` (the longest sequence the server scores), None all."""
    if keep is None:
        return prompts
    n = longest if keep == -1 else keep
    match side:
        case "left" | None:
            return [p[max(len(p) - n, 0) :] for p in prompts]
        case "right":
            return [p[:n] for p in prompts]
        case _:
            raise ValueError(f"truncation side {side!r}: 'left' or 'right'")


@functools.lru_cache(maxsize=8)
def _position_template(top_k: int) -> str:
    """One position's top-K entries as a %-format (token id, log-prob per rank), without the closing
    brace. ``%.9g`` writes a float32 exactly (9 significant digits round-trip every float32) in fewer
    bytes than a double's shortest text, and twice as fast."""
    return "{" + ",".join(f'"%d":{{"logprob":%.9g,"rank":{rank}}}' for rank in range(1, top_k + 1))


def _positions_json(prompt: list[int], scores: RowScores) -> str:
    """``prompt_logprobs`` of one prompt: null, then every position's top-K and the token there (its
    own entry, rank null, where it falls outside the top-K: our engines do not count its rank)."""
    top_ids_P_K = scores.top_ids_P_K
    n, k = top_ids_P_K.shape
    fields = np.empty((n, 2 * k), dtype=object)
    fields[:, 0::2] = top_ids_P_K.astype(object)
    fields[:, 1::2] = scores.top_logprobs_P_K.astype(np.float64).astype(object)
    token_P = np.asarray(prompt[1:], dtype=np.int64)
    in_top = (top_ids_P_K == token_P[:, None]).any(axis=1).tolist()
    template = _position_template(k)
    positions = ["null"]
    for values, top, token, token_lp in zip(
        fields.tolist(), in_top, token_P.tolist(), scores.token_logprob_P.tolist(), strict=True
    ):
        end = "}" if top else f',"{token}":{{"logprob":{token_lp:.9g},"rank":null}}}}'
        positions.append(template % tuple(values) + end)
    return "[" + ",".join(positions) + "]"


def completion_json(
    prompts: list[list[int]],
    scores: Sequence[RowScores],
    model: str,
    kernels: "CodecKernels | None" = None,
    request_id: str | None = None,
) -> bytes:
    """The OpenAI-compatible answer (``CompletionResponse`` as JSON) for ``prompts`` from our scores
    of every position of each (``rows_from_prompts``), the positions written by the compiled
    ``kernels`` where given (the same text); its id ``cmpl-{request_id}`` as vLLM's (default random).

    Each position holds the top-K (ranks 1..K) and the token there. Written as text from the arrays:
    building K+1 dicts per position and dumping them cost twice as much, and a model's validation
    of scores our own engine made costs as much again (bench/teacher_throughput.py)."""
    choices = []
    for index, (prompt, row_scores) in enumerate(zip(prompts, scores, strict=True)):
        head = f'{{"index":{index},"text":"","finish_reason":"length","prompt_logprobs":'.encode()
        positions = (
            None
            if kernels is None
            else kernels.positions_json(np.asarray(prompt, dtype=np.int64), row_scores)
        )
        if positions is None:
            positions = _positions_json(prompt, row_scores).encode()
        ids = pydantic_core.to_json(prompt)
        choices.append(b"".join((head, positions, b',"prompt_token_ids":', ids, b"}")))
    tokens = sum(len(p) for p in prompts)
    envelope = pydantic_core.to_json(
        {
            "id": f"cmpl-{uuid.uuid4().hex if request_id is None else request_id}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens},
        }
    ).decode()
    before, after = envelope.split('"choices":[]', 1)
    return b"".join((before.encode(), b'"choices":[', b",".join(choices), b"]", after.encode()))
