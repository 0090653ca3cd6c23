"""The teacher's HTTP routes over an in-process backend: the real scorer, without Serve's batching."""

from services.contracts.teacher import ScoreRequest, ScoreResponse
from services.teacher_scorer.codec import requested_top_k, response_from_scores, rows_from_request
from services.teacher_scorer.metrics import TeacherMetrics
from services.teacher_scorer.prompt_tokenizer import PromptTokenizer
from services.teacher_scorer.scorer import TeacherScorer


class InProcessBackend:
    """Route glue only: validates, scores and answers in the request's own task."""

    def __init__(self, scorer: TeacherScorer, default_top_k: int, model: str = "") -> None:
        """``model``: the checkpoint whose tokenizer reads text prompts ("": none, text is refused)."""
        self.scorer = scorer
        self.default_top_k = default_top_k
        self.tokenize = PromptTokenizer(model)
        self.metrics = TeacherMetrics(replica="in-process")

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        rows = rows_from_request(request)
        top_k = requested_top_k(request) or self.default_top_k
        self.scorer.validate(rows, top_k)
        scores, report = self.scorer.score(rows, [top_k] * len(rows))
        self.metrics.batch_done(1, len(rows), report, 0.0)
        self.metrics.request_started()
        self.metrics.request_finished(
            ok=True, sequences=len(rows), positions=sum(len(r.positions_P) for r in rows)
        )
        return response_from_scores(rows, scores)

    async def check_health(self) -> None:
        self.scorer.check_health()

    def metrics_exposition(self) -> bytes:
        return self.metrics.exposition()
