"""The `teacher` Ray Serve application: a thin deployment around TeacherScorer.

Python callers use the handle method ``score_packed`` (flat numpy buffers); HTTP clients use the
FastAPI routes of ``routes.py``, built on each replica after its constructor, with the replica's
token and ``[teacher] http_max_*`` caps. Requests are validated alone, then cut into chunks that join one
batch queue (``@serve.batch``, sized in tokens), so concurrent requests share forward passes.
"""

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import ray
from fastapi import FastAPI
from ray import serve
from ray.serve import Application, Deployment

from services.contracts.teacher import (
    PackedScoreRequest,
    PackedScoreResponse,
    ScoreRequest,
    ScoreResponse,
    TeacherContext,
    TeacherReplicaStats,
)
from services.errors import InputError
from services.serve_config import ServeAppArgs, load_app_args
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.codec import (
    pack_scores,
    requested_top_k,
    response_from_scores,
    rows_from_packed,
    rows_from_request,
)
from services.teacher_scorer.completions_native import codec_kernels
from services.teacher_scorer.engine import EngineBrokenError, RowScores, ScoreRow
from services.teacher_scorer.engine_factory import make_engine
from services.teacher_scorer.metrics import TeacherMetrics
from services.teacher_scorer.packing import chunk_by_tokens
from services.teacher_scorer.placement import deployment_options
from services.teacher_scorer.prompt_tokenizer import PromptTokenizer
from services.teacher_scorer.routes import ScoreBackend, TeacherHttpCaps, build_http_app
from services.teacher_scorer.scorer import TeacherScorer

_DEFAULT_BATCH_TOKENS = TeacherSettings.model_fields["max_batch_tokens"].default


@dataclass(frozen=True)
class _Chunk:
    """Consecutive rows of one request: the unit of the batch queue."""

    request_id: int
    rows: Sequence[ScoreRow]
    top_k: int

    @property
    def tokens(self) -> int:
        return sum(r.length for r in self.rows)


def _chunk_tokens(chunks: list[_Chunk]) -> int:
    return sum(c.tokens for c in chunks)


@serve.deployment
@serve.ingress()
class TeacherDeployment:
    """One replica: a loaded engine, its scorer, a batch queue, metrics."""

    def __init__(
        self, settings: TeacherSettings, default_top_k: int, service_token: str | None = None
    ) -> None:
        self.service_token = service_token  # HTTP routes demand it when set (handle calls are in-cluster)
        self._scorer = TeacherScorer(
            make_engine(settings),
            token_budget=settings.token_budget,
            max_batch_size=settings.max_batch_size,
            pass_overhead_tokens=settings.pass_overhead_tokens,
        )
        self.default_top_k = default_top_k
        self._http_caps = TeacherHttpCaps.of(settings)
        self.tokenize = PromptTokenizer(settings.model)
        self.served_model = settings.model
        self.codec_kernels = codec_kernels(settings.native_codec)
        self._chunk_tokens = settings.token_budget
        self._request_ids = itertools.count()
        self._metrics = TeacherMetrics(replica=ray.get_runtime_context().get_actor_name() or "local")
        batcher: Any = self._score_chunks  # @serve.batch attaches its setters to the method
        batcher.set_max_batch_size(settings.max_batch_tokens)
        batcher.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The replica's HTTP face (Serve calls it after the constructor): the routes over this object."""
        return build_http_app(lambda: cast(ScoreBackend, self), lambda: self.service_token, self._http_caps)

    async def score_packed(self, request: PackedScoreRequest) -> PackedScoreResponse:
        """Handle path: packed buffers in, packed buffers out."""
        top_k = request.top_k or self.default_top_k
        scores = await self.score_rows(rows_from_packed(request), top_k)
        return pack_scores(scores, top_k)

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """HTTP path (and handle callers holding JSON-shaped requests)."""
        rows = rows_from_request(request)
        scores = await self.score_rows(rows, requested_top_k(request) or self.default_top_k)
        return response_from_scores(rows, scores)

    async def check_health(self) -> None:
        """Serve calls this periodically; raising makes Serve replace the replica."""
        try:
            await asyncio.to_thread(self._scorer.check_health)
        except EngineBrokenError:
            self._metrics.set_healthy(False)
            raise

    def limits(self) -> TeacherContext:
        """The longest sequence this replica scores (its context and token budget)."""
        return self._scorer.limits.context

    def stats(self) -> TeacherReplicaStats:
        return self._metrics.stats()

    def metrics_exposition(self) -> bytes:
        return self._metrics.exposition()

    async def score_rows(self, rows: list[ScoreRow], top_k: int) -> list[RowScores]:
        """Validate, then score in the replica's batches (every path ends here)."""
        try:
            self._scorer.validate(rows, top_k)
        except InputError:
            self._metrics.request_rejected()
            raise
        request_id = next(self._request_ids)
        cuts = chunk_by_tokens([r.length for r in rows], self._chunk_tokens)
        chunks = [_Chunk(request_id, [rows[i] for i in cut], top_k) for cut in cuts]
        self._metrics.request_started()
        start = time.perf_counter()
        try:
            parts = await asyncio.gather(*(self._score_chunks(c) for c in chunks))
        except BaseException:
            self._metrics.request_finished(ok=False, seconds=time.perf_counter() - start)
            raise
        scores = [s for part in parts for s in part]
        self._metrics.request_finished(
            ok=True,
            sequences=len(rows),
            positions=sum(len(r.positions_P) for r in rows),
            seconds=time.perf_counter() - start,
        )
        return scores

    @serve.batch(max_batch_size=_DEFAULT_BATCH_TOKENS, batch_size_fn=_chunk_tokens)
    async def _score_chunks(self, chunks: list[_Chunk]) -> list[list[RowScores]]:
        rows = [r for c in chunks for r in c.rows]
        top_ks = [c.top_k for c in chunks for _ in c.rows]
        start = time.perf_counter()
        # A worker thread keeps the event loop free: new requests queue up and health checks answer
        # while the engine runs.
        scores, report = await asyncio.to_thread(self._scorer.score, rows, top_ks)
        self._metrics.batch_done(
            len({c.request_id for c in chunks}), len(rows), report, time.perf_counter() - start
        )
        out: list[list[RowScores]] = []
        start_row = 0
        for chunk in chunks:
            out.append(scores[start_row : start_row + len(chunk.rows)])
            start_row += len(chunk.rows)
        return out


def teacher_application(
    settings: TeacherSettings, default_top_k: int, service_token: str | None = None
) -> Application:
    """The bound teacher application; run it with ``serve.run(app, name=APP_NAME)``."""
    deployment = cast(Deployment, TeacherDeployment)
    return deployment.options(**deployment_options(settings)).bind(settings, default_top_k, service_token)


class TeacherAppArgs(ServeAppArgs):
    """Arguments of the Serve config's ``args:`` block for ``import_path: ...serve_app:build_app``."""

    model_path: str | None = None


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder: settings from ``config_path`` (TOML), teacher checkpoint ``model_path``.

    Serve configs run on clusters, where the proxy listens on every interface: a service token is
    required (``TURNOPD_SERVICE_TOKEN`` or ``[security] service_token``).
    """
    parsed, settings, token = load_app_args(args, TeacherAppArgs, "teacher")
    teacher = settings.teacher
    if parsed.model_path is not None:
        teacher = TeacherSettings.model_validate({**teacher.model_dump(), "model": parsed.model_path})
    return teacher_application(teacher, settings.distill.distill_topk, token)
