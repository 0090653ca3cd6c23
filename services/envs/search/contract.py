"""Search-R1's retrieval protocol (`POST /retrieve`), spoken by the project's retrieval server and
by the `search` env's remote retriever::

    {"queries": ["..."], "topk": 3, "return_scores": true}
    -> {"result": [[{"document": {"id": "...", "contents": "\\"Title\\"\\ntext"}, "score": 1.2}, ...], ...]}

Without ``return_scores`` each inner list holds the documents themselves. Documents and results
sent by other Search-R1 servers may carry more fields (e.g. ``title``, ``text``): those models
ignore unknown fields instead of refusing them.
"""

from pydantic import ConfigDict, Field

from services.contracts.base import Contract, JsonBool, JsonPositiveInt


class RetrieveRequest(Contract):
    """Top-k passages for each query."""

    # env_gateway (search env) -> retrieval server
    queries: list[str] = Field(min_length=1, description="Queries, answered in order.")
    topk: JsonPositiveInt | None = Field(None, description="Passages per query (null: the server's default).")
    return_scores: JsonBool = Field(False, description="Wrap each document with its retrieval score.")


class RetrievedDocument(Contract):
    """One corpus entry in Search-R1's format."""

    # retrieval server -> env_gateway (search env)
    model_config = ConfigDict(extra="ignore")  # other Search-R1 servers add fields of their own
    id: str | None = Field(None, description="Corpus id of the passage.")
    contents: str = Field(description="The quoted title, a newline, then the passage text.")


class ScoredDocument(Contract):
    """A document with its retrieval score (higher is better)."""

    # retrieval server -> env_gateway (search env)
    model_config = ConfigDict(extra="ignore")
    document: RetrievedDocument
    score: float = Field(description="Retriever score (BM25 here; inner product for dense retrievers).")


class RetrieveResponse(Contract):
    """Answer to a RetrieveRequest with ``return_scores`` true: one best-first list per query."""

    # retrieval server -> env_gateway (search env)
    model_config = ConfigDict(extra="ignore")
    result: list[list[ScoredDocument]]


class RetrieveDocumentsResponse(Contract):
    """Answer to a RetrieveRequest with ``return_scores`` false."""

    # retrieval server -> env_gateway (search env)
    model_config = ConfigDict(extra="ignore")
    result: list[list[RetrievedDocument]]


class RetrievalHealth(Contract):
    """Liveness of the retrieval server."""

    # retrieval server -> operator / env_gateway
    status: str = Field(description="'ok' once the index is loaded.")
    documents: int = Field(ge=0, description="Passages in the index.")
    corpus: str = Field(description="Where the passages come from.")
