"""Conversions between OpenAI-compatible ``/v1/completions`` prompt log-probs and our top-K rows.

A row's position ``p`` scores token ``p`` given tokens ``[0, p)``; the server's
``prompt_logprobs[p]`` is exactly that distribution's top entries (plus the token at ``p``), so
positions map one to one and ``prompt_logprobs[0]`` (null) is never read.

The endpoint does not return the full-vocabulary entropy. It is estimated from what it returns,
treating the mass outside the top-K as one bucket, as the loss's tail bucket does:
``H ~= -sum_{j in S} p_j log p_j - p_tail log p_tail``, a lower bound of the true entropy that is
tight when the tail is small or flat-free.
"""

import math
import time
import uuid
from collections.abc import Sequence

import numpy as np

from services.contracts.completions import (
    CompletionChoice,
    CompletionRequest,
    CompletionResponse,
    CompletionUsage,
    PositionLogprobs,
)
from services.contracts.teacher import ScoreRequest, ScoreResponse, ScoreSequence
from services.errors import InputError, TurnOPDError
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.token_probe import first_difference


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
    response: CompletionResponse, rows: Sequence[ScoreRow], top_k: int
) -> list[RowScores]:
    """Our top-K rows from the endpoint's answer to ``completion_request(rows, top_k, ...)``."""
    choices = sorted(response.choices, key=lambda c: c.index)
    if [c.index for c in choices] != list(range(len(rows))):
        raise EndpointAnswerError(
            f"the endpoint answered choices {[c.index for c in choices][:10]} for {len(rows)} prompts"
        )
    return [_row_scores(choice, row, top_k) for choice, row in zip(choices, rows, strict=True)]


def _row_scores(choice: CompletionChoice, row: ScoreRow, top_k: int) -> RowScores:
    token_ids = row.token_ids_T.tolist()
    if choice.prompt_token_ids is not None and choice.prompt_token_ids != token_ids:
        raise EndpointAnswerError(
            f"prompt {choice.index}: the endpoint scored other tokens than were sent "
            f"(first difference at {first_difference(choice.prompt_token_ids, token_ids)}); it must "
            "take token ids as they are, with the student's tokenizer"
        )
    if choice.prompt_logprobs is None or len(choice.prompt_logprobs) != len(token_ids):
        got = None if choice.prompt_logprobs is None else len(choice.prompt_logprobs)
        raise EndpointAnswerError(
            f"prompt {choice.index}: {got} prompt_logprobs entries for {len(token_ids)} tokens "
            "(was prompt_logprobs sent, and does the server support it?)"
        )
    n = len(row.positions_P)
    top_ids = np.empty((n, top_k), dtype=np.int64)
    top_lps = np.empty((n, top_k), dtype=np.float32)
    token_lp = np.empty(n, dtype=np.float32)
    entropy = np.empty(n, dtype=np.float32)
    for i, p in enumerate(row.positions_P.tolist()):
        entries = choice.prompt_logprobs[p]
        where = f"prompt {choice.index}, position {p}"
        if entries is None:
            raise EndpointAnswerError(f"{where}: no prompt log-probs")
        ranked = sorted(entries.items(), key=lambda kv: (-kv[1]["logprob"], kv[0]))[:top_k]
        if len(ranked) < top_k:
            raise EndpointAnswerError(f"{where}: {len(entries)} log-probs, fewer than top_k = {top_k}")
        actual = entries.get(token_ids[p])
        if actual is None:
            raise EndpointAnswerError(
                f"{where}: the log-prob of the token there ({token_ids[p]}) is missing from the answer"
            )
        top_ids[i] = [token for token, _ in ranked]
        top_lps[i] = [entry["logprob"] for _, entry in ranked]
        token_lp[i] = actual["logprob"]
        entropy[i] = topk_tail_entropy(top_lps[i])
    return RowScores(top_ids, top_lps, token_lp, entropy)


def topk_tail_entropy(top_logprobs_K: np.ndarray) -> float:
    """Entropy (nats) of the top-K plus one bucket holding the rest of the mass."""
    lp = top_logprobs_K.astype(np.float64)
    head = float(-(np.exp(lp) * lp).sum())
    tail = 1.0 - float(np.exp(lp).sum())
    return head - tail * math.log(tail) if tail > 0.0 else head


def score_request_from_completion(prompts: list[list[int]], top_k: int) -> ScoreRequest:
    """Our scoring request for every position after the first of each prompt (the request's token
    ids, or its text as this server tokenised it), at K = prompt_logprobs."""
    for index, prompt in enumerate(prompts):
        if len(prompt) < 2:
            raise InputError(
                f"prompt {index} is {len(prompt)} token(s); prompt log-probs need at least 2 (the first "
                "has nothing before it)"
            )
    return ScoreRequest(
        sequences=[ScoreSequence(token_ids=p, positions=list(range(1, len(p)))) for p in prompts],
        top_k=top_k,
    )


def completion_from_scores(prompts: list[list[int]], scores: ScoreResponse, model: str) -> CompletionResponse:
    """The OpenAI-compatible answer for ``prompts`` from our scores of every position of each.

    Each position holds the top-K (ranks 1..K) and the token there; that token's rank is left
    None when it falls outside the top-K (our engines do not count it)."""
    choices = []
    for index, (prompt, seq) in enumerate(zip(prompts, scores.results, strict=True)):
        positions: list[PositionLogprobs | None] = [None]
        for p, ids, lps, token_lp in zip(
            seq.positions, seq.top_ids, seq.top_logprobs, seq.token_logprob, strict=True
        ):
            entries: PositionLogprobs = {
                t: {"logprob": lp, "rank": j} for j, (t, lp) in enumerate(zip(ids, lps, strict=True), 1)
            }
            entries.setdefault(prompt[p], {"logprob": token_lp, "rank": None})
            positions.append(entries)
        # Built from scores our own contracts validated: validating K+1 entries per position again
        # would cost as much as building them.
        choices.append(
            CompletionChoice.model_construct(
                index=index,
                text="",
                finish_reason="length",
                prompt_logprobs=positions,
                prompt_token_ids=prompt,
            )
        )
    tokens = sum(len(p) for p in prompts)
    return CompletionResponse(
        id=f"cmpl-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=model,
        choices=choices,
        usage=CompletionUsage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens),
    )
