"""The remote retriever sends the run's service token: the real retrieval app answers it, and a
missing or wrong token is a RetrievalError that says which."""

import httpx
import pytest
from in_process_app import app_transport

from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.remote import RemoteRetriever
from services.envs.search.retrieval import RetrievalError
from services.retrieval_server.app import create_app
from services.settings.retrieval_server import RetrievalServerSettings

TOKEN = "s3cret-token"
DOCS = [("city-1", '"Kessrow"\nKessrow is a city in Vel.'), ("country-1", '"Vel"\nVel is a country.')]


@pytest.fixture(scope="module")
def server() -> httpx.MockTransport:
    """The retrieval server's app with a token, reached in-process through the client's httpx stack."""
    return app_transport(create_app(Bm25Retriever(DOCS), RetrievalServerSettings(), "test", TOKEN))


def retriever(server: httpx.MockTransport, token: str | None) -> RemoteRetriever:
    return RemoteRetriever("http://retrieval.test/", 2.0, service_token=token, transport=server)


def test_with_the_token_the_server_answers(server: httpx.MockTransport):
    [hits] = retriever(server, TOKEN).retrieve(["Kessrow"], 1)
    assert [(hit.id, hit.title) for hit in hits] == [("city-1", "Kessrow")]


def test_without_the_token_the_error_says_the_run_has_none(server: httpx.MockTransport):
    with pytest.raises(RetrievalError) as refused:
        retriever(server, None).retrieve(["Kessrow"], 1)
    assert str(refused.value) == (
        "the retrieval server at http://retrieval.test/retrieve demands a service token that this run "
        "does not have (401): set the same [security] service_token / TURNOPD_SERVICE_TOKEN for the "
        "run and the server"
    )


def test_a_wrong_token_is_refused_by_name(server: httpx.MockTransport):
    with pytest.raises(RetrievalError, match=r"refused the service token \(401\): set the same"):
        retriever(server, "not-it").retrieve(["Kessrow"], 1)


def test_the_header_is_sent_only_with_a_token():
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json={"result": [[]]})

    for token in (TOKEN, None):
        remote = RemoteRetriever("http://retrieval.test", 1.0, token, httpx.MockTransport(handler))
        remote.retrieve(["q"], 1)
    assert seen == [f"Bearer {TOKEN}", None]
