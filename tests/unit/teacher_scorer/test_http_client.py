"""The HTTP client's retry rules, over httpx's mock transport (glue only; the real server is in
tests/integration/test_teacher_serve.py)."""

import asyncio

import httpx
import pytest

from services.contracts.teacher import ScoreRequest, ScoreSequence
from services.errors import InputError
from services.teacher_scorer.http_client import TeacherHttpClient, TeacherHttpError
from services.teacher_scorer.retry import RetryPolicy

REQUEST = ScoreRequest(sequences=[ScoreSequence(token_ids=[1, 2, 3], positions=[2])])
OK = {
    "results": [
        {
            "positions": [2],
            "top_ids": [[3, 1]],
            "top_logprobs": [[-0.1, -2.4]],
            "token_logprob": [-0.1],
            "entropy": [0.4],
        }
    ]
}
FAST = RetryPolicy(max_attempts=4, backoff_s=0.001, max_backoff_s=0.002)


def run(answers):
    """Score REQUEST against a server giving ``answers`` in turn; return (result or error, bodies seen)."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        answer = answers[min(len(seen), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def go():
        client = TeacherHttpClient("http://teacher/", policy=FAST, transport=httpx.MockTransport(handler))
        async with client:
            try:
                return await client.score(REQUEST), client.retries
            except Exception as exc:
                return exc, client.retries

    result, retries = asyncio.run(go())
    return result, retries, seen


def test_connection_errors_and_503_are_retried():
    result, retries, seen = run(
        [
            httpx.ConnectError("refused"),
            httpx.Response(503, json={"detail": "busy"}),
            httpx.Response(200, json=OK),
        ]
    )
    assert retries == 2 and len(seen) == 3
    assert result.results[0].top_ids == [[3, 1]]
    # top_k was not set by the caller, so it is not sent: the server applies its distill_topk.
    assert b"top_k" not in seen[0]


def test_4xx_is_an_input_error_without_retry():
    result, retries, _ = run(
        [httpx.Response(422, json={"detail": "sequence 0: token id 999 at index 1 ..."})]
    )
    assert isinstance(result, InputError) and retries == 0
    assert "422" in str(result) and "token id 999" in str(result)


def test_500_is_not_retried_and_attempts_are_bounded():
    result, retries, _ = run([httpx.Response(500, text="boom")])
    assert isinstance(result, TeacherHttpError) and retries == 0 and "boom" in str(result)
    result, retries, seen = run([httpx.Response(503, json={"detail": "down"})])
    assert isinstance(result, TeacherHttpError) and "503" in str(result)
    assert len(seen) == FAST.max_attempts and retries == FAST.max_attempts - 1
    result, _, seen = run([httpx.ConnectError("refused")])
    assert isinstance(result, TeacherHttpError) and "unreachable after 4 attempts" in str(result)


def test_backoff_doubles_and_is_capped():
    policy = RetryPolicy(max_attempts=6, backoff_s=0.5, max_backoff_s=3.0)
    assert [policy.delay(a) for a in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.total_wait() == pytest.approx(9.5)


def test_the_service_token_is_sent_as_a_bearer():
    headers = []

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers.get("authorization"))
        return httpx.Response(200, json=OK)

    async def go(token):
        transport = httpx.MockTransport(handler)
        async with TeacherHttpClient(
            "http://teacher/", policy=FAST, transport=transport, token=token
        ) as client:
            await client.score(REQUEST)

    asyncio.run(go("t-s3cret"))
    asyncio.run(go(None))
    assert headers == ["Bearer t-s3cret", None]
