"""Search-R1 retrieval contracts: JSON round trips, Search-R1's own shapes, junk refused."""

import pytest
from pydantic import ValidationError

from services.envs.search.contract import (
    RetrievalHealth,
    RetrievedDocument,
    RetrieveDocumentsResponse,
    RetrieveRequest,
    RetrieveResponse,
    ScoredDocument,
)

DOC = RetrievedDocument(id="city-0001", contents='"Kessrow"\nKessrow is a city in Vel.')
EXAMPLES = [
    RetrieveRequest(queries=["Kessrow", "Vel"], topk=3, return_scores=True),
    RetrieveRequest(queries=["q"]),
    DOC,
    RetrieveResponse(result=[[ScoredDocument(document=DOC, score=2.5)], []]),
    RetrieveDocumentsResponse(result=[[DOC]]),
    RetrievalHealth(status="ok", documents=620, corpus="/cache/corpus.jsonl"),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message):  # type: ignore[no-untyped-def]
    assert type(message).model_validate_json(message.model_dump_json()) == message


def test_search_r1_answers_with_extra_document_fields_are_read():
    body = '{"result": [[{"document": {"id": "1", "contents": "\\"T\\"\\nx", "title": "T"}, "score": 0.5}]]}'
    parsed = RetrieveResponse.model_validate_json(body)
    assert parsed.result[0][0].document.contents == '"T"\nx' and parsed.result[0][0].score == 0.5


@pytest.mark.parametrize(
    "body",
    ['{"queries": []}', '{"queries": ["q"], "topk": 0}', '{"queries": ["q"], "k": 3}', '{"topk": 3}'],
)
def test_bad_requests_are_refused(body: str):
    with pytest.raises(ValidationError):
        RetrieveRequest.model_validate_json(body)
