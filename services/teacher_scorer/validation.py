"""Checks a scoring request against the loaded teacher; every problem becomes an InputError naming it.

Runs before a request joins a batch, so one bad request never fails the batch it would have joined.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.contracts.teacher import TeacherContext
from services.errors import InputError
from services.teacher_scorer.engine import ScoreRow


@dataclass(frozen=True)
class TeacherLimits:
    """What the loaded teacher accepts."""

    vocab_size: int
    max_context: int  # the engine's longest sequence (vLLM: one below its max_model_len)
    token_budget: int  # padded tokens of one forward pass
    max_top_k: int  # the vocabulary, or less where the engine caps it (vLLM's max_logprobs)

    @property
    def max_length(self) -> int:
        return min(self.max_context, self.token_budget)

    @property
    def context(self) -> TeacherContext:
        """What the teacher reports of these limits (``TeacherDeployment.limits``)."""
        return TeacherContext(max_context=self.max_context, token_budget=self.token_budget)


class SequenceTooLongError(InputError):
    """A sequence is longer than the teacher scores; carries the teacher's limits, so a caller can
    drop what does not fit and send the rest again (a replica restarted with a lower context)."""

    def __init__(self, index: int, length: int, context: TeacherContext) -> None:
        super().__init__(f"sequence {index}: {length} tokens exceed {context.limit_text}")
        self.index, self.length, self.context = index, length, context

    def __reduce__(self) -> tuple[type["SequenceTooLongError"], tuple[int, int, TeacherContext]]:
        return SequenceTooLongError, (self.index, self.length, self.context)


def validate_top_k(top_k: int, limits: TeacherLimits) -> None:
    if 1 <= top_k <= limits.max_top_k:
        return
    what = (
        "the teacher's vocabulary" if limits.max_top_k == limits.vocab_size else "the engine's log-prob cap"
    )
    raise InputError(f"top_k must be in [1, {limits.max_top_k}] ({what}), got {top_k}")


def validate_row(index: int, row: ScoreRow, limits: TeacherLimits) -> None:
    """Raise InputError if sequence ``index`` cannot be scored as given."""
    where = f"sequence {index}"
    length = row.length
    if length < 2:
        raise InputError(f"{where}: needs at least 2 tokens, got {length}")
    if length > limits.max_length:
        raise SequenceTooLongError(index, length, limits.context)
    bad_ids = np.flatnonzero((row.token_ids_T < 0) | (row.token_ids_T >= limits.vocab_size))
    if bad_ids.size:
        i = int(bad_ids[0])
        raise InputError(
            f"{where}: token id {int(row.token_ids_T[i])} at index {i} is outside the teacher's vocabulary "
            f"[0, {limits.vocab_size})"
        )
    if row.positions_P.size == 0:
        raise InputError(f"{where}: no positions to score")
    bad_pos = np.flatnonzero((row.positions_P < 1) | (row.positions_P >= length))
    if bad_pos.size:
        p = int(row.positions_P[int(bad_pos[0])])
        raise InputError(
            f"{where}: position {p} is outside [1, {length}) (position i scores token i given tokens before it)"
        )


def validate_rows(rows: Sequence[ScoreRow], top_k: int, limits: TeacherLimits) -> None:
    """Validate a whole request: its top_k and every sequence."""
    if not rows:
        raise InputError("request has no sequences")
    validate_top_k(top_k, limits)
    for index, row in enumerate(rows):
        validate_row(index, row, limits)
