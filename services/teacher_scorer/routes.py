"""HTTP routes of the teacher: ``POST /v1/score``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /healthz``, ``GET /readyz``, ``GET /metrics``.

The app is built around a backend provider, so the same routes serve inside a Serve replica (the
provider returns the replica's deployment object) and in-process (any object with these methods).
Errors are translated here, once, by ``TEACHER_ERRORS`` (which also documents them): InputError ->
422 with its message, OverLimitError -> 413, EngineBrokenError -> 503. With a service token every
route but ``/healthz`` answers 401 without it. ``/healthz`` is liveness only and touches no model;
``/readyz`` runs the engine's health check (a tiny forward). What one request may ask is capped
(``TeacherHttpCaps``, from ``[teacher] http_max_*``; the app's OpenAPI description lists them):
its body, its sequences, its ``top_k`` and its scored positions x ``top_k``, checked before any
scoring. Request bodies are parsed as JSON into ``ScoreRequest`` only. ``/v1/completions`` answers
the scoring subset of the OpenAI-compatible protocol (``contracts/completions.py``: it takes every
field of vLLM's request; each acts, cannot change prompt log-probs, or is refused naming its value)
from the same scorer, and ``/v1/models`` names the served model and its context as vLLM does, so
vLLM-speaking clients, our ``EndpointTeacherClient`` among them, can use this app without being
told its context.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from services.contracts.completions import CompletionRequest, CompletionResponse, ModelCard, ModelList
from services.contracts.http_errors import ErrorDetail
from services.contracts.teacher import ScoreRequest, ScoreResponse, TeacherContext, TeacherHealth
from services.errors import InputError
from services.http_auth import TokenProvider, require_service_token, set_token_provider
from services.http_limits import Cap, OverLimitError, body_cap, install_limits
from services.http_responses import PROMETHEUS_TEXT, ErrorStatus, ErrorTable
from services.http_validation import install_validation_handler
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.codec import requested_top_k
from services.teacher_scorer.completions_codec import completion_json, rows_from_prompts, truncated_prompts
from services.teacher_scorer.completions_native import CodecKernels
from services.teacher_scorer.engine import EngineBrokenError, RowScores, ScoreRow


class ScoreBackend(Protocol):
    served_model: str  # the name /v1/models lists: the teacher checkpoint as the app was given it
    codec_kernels: CodecKernels | None  # /v1/completions writes its answers with these where set
    default_top_k: int  # the top_k of a /v1/score request that sets none (the run's distill_topk)

    async def score(self, request: ScoreRequest) -> ScoreResponse: ...

    async def score_rows(self, rows: list[ScoreRow], top_k: int) -> list[RowScores]:
        """Validate and score engine rows (the OpenAI-compatible route's path: no model objects)."""
        ...

    def limits(self) -> TeacherContext: ...

    async def check_health(self) -> None: ...

    def metrics_exposition(self) -> bytes: ...

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of a text prompt with the teacher checkpoint's tokenizer (InputError without one)."""
        ...


@dataclass(frozen=True)
class TeacherHttpCaps:
    """What one HTTP request may ask of the teacher (``[teacher] http_max_*``)."""

    body: Cap
    sequences: Cap
    top_k: Cap
    entries: Cap

    @classmethod
    def of(cls, settings: TeacherSettings) -> "TeacherHttpCaps":
        return cls(
            body=body_cap(settings.http_max_body_bytes, "[teacher] http_max_body_bytes"),
            sequences=Cap(
                "sequences (prompts) in one request",
                settings.http_max_sequences,
                "[teacher] http_max_sequences",
            ),
            top_k=Cap("top_k (prompt_logprobs)", settings.http_max_top_k, "[teacher] http_max_top_k", 422),
            entries=Cap(
                "top-K entries (scored positions x top_k) in one request",
                settings.http_max_entries,
                "[teacher] http_max_entries",
            ),
        )

    def check(self, sequences: int, positions: int, top_k: int) -> None:
        """Refuse a request over a cap: OverLimitError (413), or InputError (422) for its top_k."""
        self.sequences.check(sequences)
        if top_k > self.top_k.value:
            # The engine's own refusal reads the same, so clients parse one message for the cap.
            raise InputError(f"top_k must be in [1, {self.top_k.value}] ({self.top_k.setting}), got {top_k}")
        self.entries.check(positions * top_k)


def _backend(request: Request) -> ScoreBackend:
    provider: Callable[[], ScoreBackend] = request.app.state.backend_provider
    return provider()


def _caps(request: Request) -> TeacherHttpCaps:
    caps: TeacherHttpCaps = request.app.state.caps
    return caps


def _replica_replaced(exc: EngineBrokenError) -> ErrorDetail:
    return ErrorDetail(detail=f"{exc}; the replica is being replaced, retry")


TEACHER_ERRORS = ErrorTable(
    ErrorStatus(
        OverLimitError,
        413,
        "More sequences, or scored positions x top_k, than one request may ask (the API description "
        "lists the caps).",
    ),
    ErrorStatus(
        InputError,
        422,
        "Well-formed but not scorable by this teacher: a token id outside its vocabulary, a sequence "
        "longer than its context, a top_k above its cap or vocabulary, a text prompt to a teacher without "
        "a tokenizer.",
    ),
    ErrorStatus(
        EngineBrokenError,
        503,
        "The engine is broken; the replica is being replaced, retry.",
        render=_replica_replaced,
    ),
)
Backend = Annotated[ScoreBackend, Depends(_backend)]
Caps = Annotated[TeacherHttpCaps, Depends(_caps)]
router = APIRouter()
_AUTH = [Depends(require_service_token)]
_SCORING_ERRORS = TEACHER_ERRORS.responses(
    InputError, OverLimitError, EngineBrokenError, request="json", bearer=True
)


@router.post(
    "/v1/score",
    response_model=ScoreResponse,
    dependencies=_AUTH,
    responses=_SCORING_ERRORS,
)
async def score(body: ScoreRequest, backend: Backend, caps: Caps) -> Response:
    """Top-K teacher log-probs at the given positions of each sequence."""
    top_k = requested_top_k(body) or backend.default_top_k
    caps.check(len(body.sequences), sum(len(s.positions) for s in body.sequences), top_k)
    result = await backend.score(body)
    return Response(content=result.model_dump_json(), media_type="application/json")


@router.post(
    "/v1/completions",
    response_model=CompletionResponse,
    dependencies=_AUTH,
    responses=_SCORING_ERRORS,
)
async def completions(body: CompletionRequest, backend: Backend, caps: Caps) -> Response:
    """Prompt log-probs (top ``prompt_logprobs`` and the token there) of token-id prompts, or of a text
    prompt tokenised by the teacher's own tokenizer; generates nothing (``max_tokens`` <= 1, ``text``
    empty). Takes every field of vLLM's request: ``truncate_prompt_tokens``, ``truncation_side``,
    ``add_special_tokens`` and ``request_id`` act as in vLLM; sampling fields (``temperature``,
    ``top_p``, ``seed``, ``stop``, ...) have no effect, as they cannot change prompt log-probs; a
    value asking for what this app does not make (``stream``, ``n`` > 1, ``echo``, ``logprobs``,
    ``suffix``, structured output, ...) is a 422 naming the field and the value, as is a field
    vLLM's request does not have."""
    if isinstance(body.prompt, str):
        prompts = [backend.tokenize(body.prompt, add_special_tokens=body.add_special_tokens is not False)]
    else:
        prompts = body.prompts
    if body.truncate_prompt_tokens is not None:
        longest = backend.limits().max_length
        prompts = truncated_prompts(prompts, body.truncate_prompt_tokens, body.truncation_side, longest)
    caps.check(len(prompts), sum(max(len(p) - 1, 0) for p in prompts), body.prompt_logprobs)
    scores = await backend.score_rows(rows_from_prompts(prompts), body.prompt_logprobs)
    model = body.model or "teacher"
    answer = completion_json(prompts, scores, model, backend.codec_kernels, body.request_id)
    return Response(content=answer, media_type="application/json")


@router.get(
    "/v1/models",
    response_model=ModelList,
    dependencies=_AUTH,
    responses=TEACHER_ERRORS.responses(bearer=True),
)
def models(backend: Backend) -> ModelList:
    """The one model this app serves, with ``max_model_len`` one above the longest sequence it
    scores (vLLM's count: a client subtracts the token it would generate)."""
    card = ModelCard(id=backend.served_model, max_model_len=backend.limits().max_length + 1)
    return ModelList(data=[card])


@router.get("/healthz", response_model=TeacherHealth)
def healthz() -> TeacherHealth:
    """Liveness: the app answers. Touches no model (Serve's own health check runs the engine's)."""
    return TeacherHealth(status="ok")


@router.get(
    "/readyz",
    response_model=TeacherHealth,
    dependencies=_AUTH,
    responses=TEACHER_ERRORS.responses(EngineBrokenError, bearer=True),
)
async def readyz(backend: Backend) -> TeacherHealth:
    """Readiness: the engine scores a tiny sequence (a forward pass), else 503."""
    await backend.check_health()
    return TeacherHealth(status="ok")


@router.get(
    "/metrics",
    dependencies=_AUTH,
    response_class=Response,
    responses=PROMETHEUS_TEXT | TEACHER_ERRORS.responses(bearer=True),
)
def metrics(backend: Backend) -> Response:
    return Response(content=backend.metrics_exposition(), media_type=CONTENT_TYPE_LATEST)


def build_http_app(
    backend_provider: Callable[[], ScoreBackend],
    token_provider: TokenProvider = lambda: None,
    caps: TeacherHttpCaps | None = None,
) -> FastAPI:
    """The FastAPI app of the teacher, answering with whatever ``backend_provider()`` returns, within
    ``caps`` (None: those of the default ``[teacher]`` settings)."""
    caps = caps or TeacherHttpCaps.of(TeacherSettings())
    app = FastAPI(title="TurnOPD teacher scorer", version="1")
    app.state.backend_provider = backend_provider
    app.state.caps = caps
    set_token_provider(app, token_provider)
    app.include_router(router)
    TEACHER_ERRORS.install(app)
    install_validation_handler(app)
    install_limits(app, caps.body, [caps.sequences, caps.top_k, caps.entries])
    return app
