"""The project's Search-R1-compatible retrieval server: `POST /retrieve` and `GET /healthz` over a
BM25 index (the search env's generated encyclopedia, or any Search-R1 corpus JSONL).

``delay_s`` and ``fail_every`` are failure drills: they make the server slow or make every N-th
request fail with 503, so clients' timeout and error handling can be exercised against a real
server process. Errors become statuses in ``RETRIEVAL_ERRORS``, which also documents them.

What one request may ask is capped (``[retrieval_server] max_body_bytes``, ``max_queries``,
``max_topk``: 413 beyond each, ``services.http_limits``). With a service token, ``/retrieve`` and
the OpenAPI documents answer 401 without it; ``/healthz`` stays open. Bound beyond the loopback the
server refuses to start without a token.
"""

import itertools
import time
from pathlib import Path

from fastapi import Depends, FastAPI

from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.contract import (
    RetrievalHealth,
    RetrievedDocument,
    RetrieveDocumentsResponse,
    RetrieveRequest,
    RetrieveResponse,
    ScoredDocument,
)
from services.envs.search.dataset import corpus_path, read_corpus
from services.envs.search.retrieval import corpus_contents
from services.errors import TurnOPDError
from services.http_auth import require_service_token, set_token_provider
from services.http_limits import Cap, OverLimitError, body_cap, install_limits
from services.http_responses import ErrorStatus, ErrorTable
from services.http_server import run_http_server
from services.http_validation import install_validation_handler
from services.service_auth import check_bind
from services.settings.retrieval_server import RetrievalServerSettings
from services.settings.tree import TurnOPDSettings


class FailureDrillError(TurnOPDError):
    """The ``fail_every`` drill failed this request on purpose (HTTP 503)."""


RETRIEVAL_ERRORS = ErrorTable(
    ErrorStatus(
        OverLimitError, 413, "More queries, or passages per query, than the server's caps in one request."
    ),
    ErrorStatus(FailureDrillError, 503, "The `fail_every` failure drill failed this request; retry."),
)


def served_corpus(settings: TurnOPDSettings) -> Path:
    """``retrieval_server.corpus``, else the search env's corpus (by default the generated encyclopedia)."""
    if settings.retrieval_server.corpus is not None:
        return settings.retrieval_server.corpus.expanduser()
    gateway = settings.env_gateway
    return corpus_path(gateway.search, gateway.resolved_cache_dir())


def create_app(
    retriever: Bm25Retriever, settings: RetrievalServerSettings, corpus: str, token: str | None = None
) -> FastAPI:
    """The server's app; ``token``: the bearer ``/retrieve`` demands (None: open, loopback only)."""
    app = FastAPI(title="TurnOPD retrieval server", description="Search-R1 /retrieve over a BM25 index.")
    set_token_provider(app, lambda: token)
    requests = itertools.count(1)
    queries_cap = Cap(
        "queries in one /retrieve request", settings.max_queries, "[retrieval_server] max_queries"
    )
    topk_cap = Cap("passages per query (topk)", settings.max_topk, "[retrieval_server] max_topk")

    @app.get("/healthz", response_model=RetrievalHealth)
    def healthz() -> RetrievalHealth:
        return RetrievalHealth(status="ok", documents=len(retriever), corpus=corpus)

    @app.post(
        "/retrieve",
        response_model=RetrieveResponse | RetrieveDocumentsResponse,
        dependencies=[Depends(require_service_token)],
        responses=RETRIEVAL_ERRORS.responses(OverLimitError, FailureDrillError, request="json", bearer=True),
    )
    def retrieve(body: RetrieveRequest) -> RetrieveResponse | RetrieveDocumentsResponse:
        number = next(requests)
        queries_cap.check(len(body.queries))
        topk_cap.check(body.topk or settings.default_topk)
        if settings.delay_s > 0:
            time.sleep(settings.delay_s)
        if settings.fail_every and number % settings.fail_every == 0:
            raise FailureDrillError(f"failure drill: request {number} fails (every {settings.fail_every})")
        results = retriever.retrieve(body.queries, body.topk or settings.default_topk)
        documents = [
            [(RetrievedDocument(id=p.id, contents=corpus_contents(p.title, p.text)), p.score) for p in hits]
            for hits in results
        ]
        if body.return_scores:
            return RetrieveResponse(
                result=[[ScoredDocument(document=d, score=s) for d, s in row] for row in documents]
            )
        return RetrieveDocumentsResponse(result=[[d for d, _ in row] for row in documents])

    RETRIEVAL_ERRORS.install(app)
    install_validation_handler(app)
    install_limits(
        app, body_cap(settings.max_body_bytes, "[retrieval_server] max_body_bytes"), [queries_cap, topk_cap]
    )
    return app


def serve(settings: TurnOPDSettings) -> None:
    """Load the corpus, index it, and serve until interrupted (beyond the loopback only with a token)."""
    server = settings.retrieval_server
    token = settings.security.resolved_service_token()
    check_bind(server.host, token, "retrieval server")  # before the corpus is read and indexed
    path = served_corpus(settings)
    retriever = Bm25Retriever(read_corpus(path))
    app = create_app(retriever, server, str(path), token)
    run_http_server(app, server.host, server.port, token, "retrieval server")
