"""The replica's core, free of Ray: validate rows, pack them into forward passes, run the engine.

A Serve batch hands ``score`` rows from several requests, each with its own ``top_k``; every pass
is scored at the largest ``top_k`` among its rows and each row keeps its first ``top_k`` entries
(the top-K of a smaller K is the prefix of a larger one, both sorted descending).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.packing import pack_by_length, padded_tokens
from services.teacher_scorer.engine import EngineBrokenError, RowScores, ScoreRow, TeacherEngine
from services.teacher_scorer.validation import TeacherLimits, validate_rows


@dataclass(frozen=True)
class PassReport:
    """What scoring one batch cost."""

    forward_passes: int
    padded_tokens: int
    input_tokens: int


class TeacherScorer:
    """Scores validated rows with an engine, in length-sorted passes under a token budget."""

    def __init__(
        self,
        engine: TeacherEngine,
        *,
        token_budget: int,
        max_batch_size: int,
        pass_overhead_tokens: int = 256,
    ) -> None:
        self.engine = engine
        self.limits = TeacherLimits(engine.vocab_size, engine.max_context, token_budget, engine.max_top_k)
        self._max_batch_size = max_batch_size
        self._pass_overhead = pass_overhead_tokens
        self._broken: str | None = None

    def validate(self, rows: Sequence[ScoreRow], top_k: int) -> None:
        """Raise InputError naming the first problem of a request."""
        validate_rows(rows, top_k, self.limits)

    def score(self, rows: Sequence[ScoreRow], top_ks: Sequence[int]) -> tuple[list[RowScores], PassReport]:
        """Score ``rows`` (already validated), row i at ``top_ks[i]``; results in input order."""
        if self._broken is not None:
            raise EngineBrokenError(f"teacher engine is broken: {self._broken}")
        lengths = [r.length for r in rows]
        if self.engine.schedules_own_batches:
            passes = [list(range(len(rows)))]
        else:
            passes = pack_by_length(
                lengths, self.limits.token_budget, self._max_batch_size, self._pass_overhead
            )
        out: list[RowScores | None] = [None] * len(rows)
        try:
            for members in passes:
                pass_k = max(top_ks[i] for i in members)
                scored = self.engine.score([rows[i] for i in members], pass_k)
                for i, scores in zip(members, scored, strict=True):
                    out[i] = scores.truncated(top_ks[i])
        except EngineBrokenError as exc:
            # One engine failure condemns the replica: its health check fails from now on.
            self._broken = str(exc)
            raise
        report = PassReport(
            forward_passes=len(passes),
            padded_tokens=padded_tokens(lengths, passes),
            input_tokens=sum(lengths),
        )
        return [s for s in out if s is not None], report

    def check_health(self) -> None:
        """Raise EngineBrokenError if an earlier batch broke the engine or a tiny forward fails now."""
        if self._broken is not None:
            raise EngineBrokenError(f"teacher engine is broken: {self._broken}")
        try:
            self.engine.check_health()
        except EngineBrokenError as exc:
            self._broken = str(exc)
            raise
