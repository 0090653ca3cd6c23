"""Retrieval of the search env: the BM25 index finds every hop's passage; results render as Search-R1's."""

from pathlib import Path

import httpx
import pytest

from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.dataset import SearchDataset, load_dataset
from services.envs.search.remote import RemoteRetriever
from services.envs.search.retrieval import (
    RetrievalError,
    RetrievedPassage,
    information_block,
    split_contents,
)
from services.envs.search.settings import SearchEnvSettings


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> SearchDataset:
    return load_dataset(SearchEnvSettings(), tmp_path_factory.mktemp("search"))


@pytest.fixture(scope="module")
def index(dataset: SearchDataset) -> Bm25Retriever:
    return Bm25Retriever(dataset.documents)


def test_every_hop_of_every_question_finds_its_passage_first(dataset: SearchDataset, index: Bm25Retriever):
    names = sorted({name for pool in dataset.questions.values() for q in pool for name in q.chain})
    results = index.retrieve(names, topk=3)
    assert len(names) > 500
    assert [hits[0].title for hits in results] == names
    assert all(hits[0].score > hits[1].score for hits in results if len(hits) > 1)


def test_results_are_best_first_and_never_unrelated(index: Bm25Retriever):
    [hits] = index.retrieve(["capital"], topk=5)
    assert len(hits) == 5 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert index.retrieve(["qqqzzz unknownword"], topk=3) == [[]]
    assert index.retrieve([], topk=3) == []


def test_contents_and_information_block_follow_search_r1():
    assert split_contents('"Kessrow"\nKessrow is a city\n in Vel.') == (
        "Kessrow",
        "Kessrow is a city in Vel.",
    )
    passages = [
        RetrievedPassage("a", "Kessrow", "A city.", 2.0),
        RetrievedPassage("b", "Vel", "A land.", 1.0),
    ]
    assert information_block(passages) == (
        "<information>Doc 1(Title: Kessrow) A city.\nDoc 2(Title: Vel) A land.</information>"
    )
    assert information_block([]) == "<information>No passage matches the query.</information>"


def _remote(handler) -> RemoteRetriever:  # type: ignore[no-untyped-def]
    return RemoteRetriever("http://retrieval.test/", 1.0, transport=httpx.MockTransport(handler))


def test_remote_retriever_reads_search_r1_answers_and_refuses_malformed_ones():
    # A stand-in transport, only for the client's glue; tests/integration/test_search_env.py uses a server.
    def good(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/retrieve"
        doc = {"document": {"id": "7", "contents": '"T"\ntext', "title": "extra"}, "score": 1.5}
        return httpx.Response(200, json={"result": [[doc]]})

    assert _remote(good).retrieve(["q"], 3) == [[RetrievedPassage("7", "T", "text", 1.5)]]
    cases = {
        "not Search-R1": lambda r: httpx.Response(200, text="<html>"),
        "2 result lists for 1": lambda r: httpx.Response(200, json={"result": [[], []]}),
        "HTTP 502": lambda r: httpx.Response(502, text="bad gateway"),
    }
    for message, handler in cases.items():
        with pytest.raises(RetrievalError, match=message):
            _remote(handler).retrieve(["q"], 3)


def test_corpus_file_round_trip(tmp_path: Path, dataset: SearchDataset):
    from services.envs.search.dataset import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"id": "x", "contents": "\\"T\\"\\nbody"}\n\n{"contents": "\\"U\\"\\nmore"}\n')
    assert read_corpus(path) == [("x", '"T"\nbody'), ("2", '"U"\nmore')]
    assert dataset.documents[0][1].startswith('"')
