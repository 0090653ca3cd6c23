"""The teacher's HTTP routes over an in-process backend: the real scorer, without Serve's batching;
and that app served over HTTP on the loopback from a thread (``LoopbackTeacher``), stoppable and
startable again on the same port, as an OpenAI-compatible endpoint a run can score on."""

import logging
import socket
import threading
import time
from pathlib import Path

import uvicorn

from services.contracts.teacher import ScoreRequest, ScoreResponse, TeacherContext
from services.teacher_scorer.codec import requested_top_k, response_from_scores, rows_from_request
from services.teacher_scorer.completions_native import codec_kernels
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.metrics import TeacherMetrics
from services.teacher_scorer.prompt_tokenizer import PromptTokenizer
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


class InProcessBackend:
    """Route glue only: validates, scores and answers in the request's own task."""

    def __init__(
        self, scorer: TeacherScorer, default_top_k: int, model: str = "", native_codec: bool = True
    ) -> None:
        """``model``: the checkpoint whose tokenizer reads text prompts ("": none, text is refused);
        ``native_codec``: ``[teacher] native_codec``."""
        self.scorer = scorer
        self.default_top_k = default_top_k
        self.tokenize = PromptTokenizer(model)
        self.served_model = model or "teacher"
        self.codec_kernels = codec_kernels(native_codec)
        self.metrics = TeacherMetrics(replica="in-process")

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        rows = rows_from_request(request)
        scores = await self.score_rows(rows, requested_top_k(request) or self.default_top_k)
        return response_from_scores(rows, scores)

    async def score_rows(self, rows: list[ScoreRow], top_k: int) -> list[RowScores]:
        self.scorer.validate(rows, top_k)
        scores, report = self.scorer.score(rows, [top_k] * len(rows))
        self.metrics.batch_done(1, len(rows), report, 0.0)
        self.metrics.request_started()
        self.metrics.request_finished(
            ok=True, sequences=len(rows), positions=sum(len(r.positions_P) for r in rows)
        )
        return scores

    async def check_health(self) -> None:
        self.scorer.check_health()

    def limits(self) -> TeacherContext:
        return self.scorer.limits.context

    def metrics_exposition(self) -> bytes:
        return self.metrics.exposition()


class LoopbackTeacher:
    """Our teacher app scoring with ``checkpoint`` (its tokenizer reads text prompts), served by uvicorn
    on one loopback port from a thread: ``start``, ``stop`` (connections are then refused), ``start``."""

    def __init__(self, checkpoint: Path, top_k: int = 5, token_budget: int = 4096) -> None:
        engine = TransformersEngine(load_teacher_model(checkpoint, "cpu", "float32"))
        scorer = TeacherScorer(engine, token_budget=token_budget, max_batch_size=8)
        self.backend = InProcessBackend(scorer, top_k, str(checkpoint))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        config = uvicorn.Config(
            build_http_app(lambda: self.backend), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the loopback teacher did not start on port {self.port}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
        self._server = self._thread = None


class EndpointFailures(logging.Handler):
    """Counts the teacher endpoint client's failed attempts (its retry warnings) as they happen;
    ``attach``/``detach`` hang it on the client's logger."""

    LOGGER = "services.teacher_scorer.endpoint_client"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("teacher endpoint call failed"):
            self.count += 1
            self.first.set()

    def attach(self) -> "EndpointFailures":
        logging.getLogger(self.LOGGER).addHandler(self)
        return self

    def detach(self) -> None:
        logging.getLogger(self.LOGGER).removeHandler(self)
