"""The project's Search-R1-compatible retrieval server: `POST /retrieve` and `GET /healthz` over a
BM25 index (the search env's generated encyclopedia, or any Search-R1 corpus JSONL).

``delay_s`` and ``fail_every`` are failure drills: they make the server slow or make every N-th
request fail with 503, so clients' timeout and error handling can be exercised against a real
server process. Errors become statuses in ``RETRIEVAL_ERRORS``, which also documents them.
"""

import itertools
import time
from pathlib import Path

from fastapi import FastAPI

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
from services.errors import InputError, TurnOPDError
from services.http_responses import ErrorStatus, ErrorTable
from services.http_validation import install_validation_handler
from services.settings.retrieval_server import RetrievalServerSettings
from services.settings.tree import TurnOPDSettings


class TooManyQueriesError(InputError):
    """A request with more queries than ``retrieval_server.max_queries`` (HTTP 413)."""


class FailureDrillError(TurnOPDError):
    """The ``fail_every`` drill failed this request on purpose (HTTP 503)."""


RETRIEVAL_ERRORS = ErrorTable(
    ErrorStatus(TooManyQueriesError, 413, "More queries than the server's `max_queries` in one request."),
    ErrorStatus(FailureDrillError, 503, "The `fail_every` failure drill failed this request; retry."),
)


def served_corpus(settings: TurnOPDSettings) -> Path:
    """``retrieval_server.corpus``, else the search env's corpus (by default the generated encyclopedia)."""
    if settings.retrieval_server.corpus is not None:
        return settings.retrieval_server.corpus.expanduser()
    gateway = settings.env_gateway
    return corpus_path(gateway.search, gateway.resolved_cache_dir())


def create_app(retriever: Bm25Retriever, settings: RetrievalServerSettings, corpus: str) -> FastAPI:
    app = FastAPI(title="TurnOPD retrieval server", description="Search-R1 /retrieve over a BM25 index.")
    requests = itertools.count(1)

    @app.get("/healthz", response_model=RetrievalHealth)
    def healthz() -> RetrievalHealth:
        return RetrievalHealth(status="ok", documents=len(retriever), corpus=corpus)

    @app.post(
        "/retrieve",
        response_model=RetrieveResponse | RetrieveDocumentsResponse,
        responses=RETRIEVAL_ERRORS.responses(TooManyQueriesError, FailureDrillError, request="json"),
    )
    def retrieve(body: RetrieveRequest) -> RetrieveResponse | RetrieveDocumentsResponse:
        number = next(requests)
        if len(body.queries) > settings.max_queries:
            raise TooManyQueriesError(
                f"{len(body.queries)} queries; at most {settings.max_queries} per request"
            )
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
    return app


def serve(settings: TurnOPDSettings) -> None:
    """Load the corpus, index it, and serve until interrupted."""
    import uvicorn

    path = served_corpus(settings)
    retriever = Bm25Retriever(read_corpus(path))
    server = settings.retrieval_server
    uvicorn.run(
        create_app(retriever, server, str(path)), host=server.host, port=server.port, log_level="info"
    )
