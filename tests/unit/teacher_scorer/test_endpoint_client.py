"""The endpoint teacher client against our own app as the OpenAI-compatible server (in process,
over ASGI), and against a server that refuses, fails or rate-limits."""

import asyncio
import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest
from in_process_teacher import InProcessBackend
from pydantic import ValidationError

from services.errors import ConfigError, InputError
from services.models.loading import load_tokenizer
from services.settings import load_settings
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.completions_codec import EndpointAnswerError
from services.teacher_scorer.endpoint_client import (
    EndpointTeacherClient,
    TokenizerMismatchError,
    TopKAboveCapError,
    endpoint_client,
)
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.http_client import TeacherHttpError
from services.teacher_scorer.retry import RetryPolicy
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.token_probe import student_tokens
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model

FAST = RetryPolicy(max_attempts=4, backoff_s=0.001, max_backoff_s=0.001)


@pytest.fixture
def scorer(engine):
    return TeacherScorer(engine, token_budget=256, max_batch_size=8)


@pytest.fixture
def app_transport(scorer):
    return httpx.ASGITransport(app=build_http_app(lambda: InProcessBackend(scorer, default_top_k=6)))


def _every_position(rows):
    return [ScoreRow(r.token_ids_T, np.arange(1, r.length)) for r in rows]


class FlakyTransport(httpx.AsyncBaseTransport):
    """Answers the scripted failures first, then passes requests on to ``inner``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, failures: list[httpx.Response | Exception]) -> None:
        self.inner, self.failures, self.calls = inner, list(failures), 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure
        return await self.inner.handle_async_request(request)


def test_scores_equal_the_engines_on_the_same_rows(app_transport, scorer, make_rows):
    """Our app as the endpoint: top-K ids equal, log-probs within 1e-6 of the scorer's own."""
    rows = _every_position(make_rows(seed=5, lengths=[12, 30, 3, 17]))
    client = EndpointTeacherClient("http://teacher", "teacher", policy=FAST, transport=app_transport)
    got = asyncio.run(client.score_rows(rows, 8))
    want, _ = scorer.score(rows, [8] * len(rows))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.top_ids_P_K, w.top_ids_P_K)
        assert np.abs(g.top_logprobs_P_K - w.top_logprobs_P_K).max() <= 1e-6
        np.testing.assert_array_equal(g.token_logprob_P, w.token_logprob_P)
        # The entropy is the top-K-plus-tail estimate, a lower bound of the engine's full one.
        assert (g.entropy_P <= w.entropy_P + 1e-5).all()


def test_refused_connections_5xx_and_429_are_retried_then_scored(app_transport, make_rows):
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    flaky = FlakyTransport(
        app_transport,
        [
            httpx.ConnectError("connection refused"),
            httpx.Response(503, json={"detail": "replica restarting"}),
            httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {"message": "slow down"}}),
        ],
    )
    client = EndpointTeacherClient("http://teacher", None, policy=FAST, transport=flaky)
    client.sleep = record  # this client's waits only (patching asyncio.sleep caught other tests' threads)
    rows = make_rows(seed=6, lengths=[5])
    (scores,) = asyncio.run(client.score_rows(rows, 3))
    assert scores.top_ids_P_K.shape == (len(rows[0].positions_P), 3)
    assert (client.retries, flaky.calls) == (3, 4)
    assert slept == [0.001, 0.001, 7.0]  # back-off, back-off, then the 429's Retry-After


def test_an_endpoint_that_never_comes_back_stops_with_a_resume_hint(app_transport, make_rows):
    down = FlakyTransport(app_transport, [httpx.ConnectError("connection refused")] * 4)
    client = EndpointTeacherClient("http://teacher", None, policy=FAST, transport=down)
    with pytest.raises(
        TeacherHttpError, match=r"failed 4 times, last with ConnectError.*turnopd train --resume"
    ):
        asyncio.run(client.score_rows(make_rows(seed=7, lengths=[4]), 3))


def test_a_4xx_is_not_retried_and_names_the_problem(app_transport):
    client = EndpointTeacherClient("http://teacher", None, policy=FAST, transport=app_transport)
    row = ScoreRow(np.array([1, 999], dtype=np.int64), np.array([1], dtype=np.int64))
    with pytest.raises(InputError, match="token id 999 at index 1"):
        asyncio.run(client.score_rows([row], 3))
    assert client.retries == 0


def test_k_above_our_apps_cap_is_a_start_up_error_naming_both(app_transport):
    client = EndpointTeacherClient("http://teacher", None, policy=FAST, transport=app_transport)
    asyncio.run(client.check_top_k(512))
    with pytest.raises(TopKAboveCapError, match=r"distill_topk = 600 .* at most 512 .*--max-logprobs 600"):
        asyncio.run(client.check_top_k(600))


def test_k_above_a_vllm_cap_is_a_start_up_error_naming_both():
    message = "Requested prompt logprobs of 50, which is greater than max allowed: 20"
    vllm = httpx.MockTransport(
        lambda _: httpx.Response(400, json={"error": {"message": message, "code": 400}})
    )
    client = EndpointTeacherClient("http://vllm:8000", "qwen", policy=FAST, transport=vllm)
    with pytest.raises(TopKAboveCapError, match=r"distill_topk = 50 .* at most 20 .*--max-logprobs 50"):
        asyncio.run(client.check_top_k(50))


def test_the_api_key_and_model_are_sent(make_rows):
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "stop here"}})

    client = EndpointTeacherClient(
        "http://vllm:8000/", "qwen", api_key="sk-test", transport=httpx.MockTransport(answer)
    )
    with pytest.raises(InputError, match="stop here"):
        asyncio.run(client.score_rows(make_rows(seed=8, lengths=[3]), 4))
    (request,) = seen
    assert str(request.url) == "http://vllm:8000/v1/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = httpx.Response(200, content=request.content).json()
    assert (body["model"], body["prompt_logprobs"], body["max_tokens"], body["return_token_ids"]) == (
        "qwen",
        4,
        1,
        True,
    )


def test_settings_name_the_key_variable_never_the_key():
    teacher = TeacherSettings(
        endpoint_url="http://vllm:8000", endpoint_model="qwen", endpoint_api_key_env="VLLM_KEY"
    )
    client = endpoint_client(teacher, 20, {"VLLM_KEY": "sk-1"})
    assert (client.url, client.model) == ("http://vllm:8000/v1/completions", "qwen")
    with pytest.raises(ConfigError, match="'VLLM_KEY', which is not set"):
        endpoint_client(teacher, 20, {})


def test_endpoint_keys_without_a_url_are_refused():
    with pytest.raises(ValidationError, match="need endpoint_url"):
        TeacherSettings(endpoint_model="qwen")
    with pytest.raises(ValidationError, match="endpoint_api_key_env"):
        TeacherSettings(endpoint_url="http://x", endpoint_api_key_env="not a name")


def test_limits_come_from_the_setting_or_the_servers_models():
    models = {
        "object": "list",
        "data": [{"id": "qwen", "max_model_len": 4096}, {"id": "other", "max_model_len": 8}],
    }
    vllm = httpx.MockTransport(
        lambda r: httpx.Response(200, json=models) if r.url.path == "/v1/models" else httpx.Response(404)
    )
    asked = EndpointTeacherClient("http://vllm:8000", "qwen", transport=vllm)
    assert asyncio.run(asked.limits()).max_length == 4095  # vLLM needs room for the generated token
    told = EndpointTeacherClient("http://vllm:8000", "qwen", transport=vllm, max_context=100)
    assert asyncio.run(told.limits()).max_length == 100
    unknown = EndpointTeacherClient("http://vllm:8000", "missing", transport=vllm)
    with pytest.raises(ConfigError, match="it serves \\['qwen', 'other'\\], the run asks for 'missing'"):
        asyncio.run(unknown.limits())


def test_our_app_tells_its_context_so_a_client_needs_no_max_context(app_transport, scorer):
    """Our app's /v1/models names the served model and one more than the longest sequence it scores
    (vLLM's count): the client reads back exactly the scorer's limit."""
    named = EndpointTeacherClient("http://teacher", "teacher", transport=app_transport)
    assert asyncio.run(named.limits()).max_length == scorer.limits.max_length == 256  # the token budget
    only = EndpointTeacherClient("http://teacher", None, transport=app_transport)  # its only model
    assert asyncio.run(only.limits()).max_length == 256
    other = EndpointTeacherClient("http://teacher", "qwen", transport=app_transport)
    with pytest.raises(ConfigError, match="0 matching models"):
        asyncio.run(other.limits())


def test_the_example_config_scores_on_its_endpoint():
    settings = load_settings(Path(__file__).parents[3] / "configs" / "teacher_endpoint.toml")
    client = endpoint_client(settings.teacher, settings.distill.distill_topk, {"TEACHER_API_KEY": "k"})
    assert (client.url, client.model) == ("http://127.0.0.1:8001/v1/completions", "teacher")
    assert asyncio.run(client.limits()).max_length == 4095


def _zoo_teacher_app(checkpoint: Path) -> httpx.ASGITransport:
    """Our app serving a zoo teacher checkpoint, its tokenizer reading text prompts."""
    engine = TransformersEngine(load_teacher_model(checkpoint, "cpu", "float32"))
    backend = InProcessBackend(TeacherScorer(engine, token_budget=512, max_batch_size=8), 5, str(checkpoint))
    return httpx.ASGITransport(app=build_http_app(lambda: backend))


def test_an_endpoint_with_the_students_tokenizer_passes_the_probe(zoo_cache):
    student = student_tokens(load_tokenizer("student", zoo_cache), "'student'")
    client = EndpointTeacherClient(
        "http://teacher",
        "teacher",
        default_top_k=5,
        policy=FAST,
        transport=_zoo_teacher_app(zoo_cache / "models" / "teacher"),
    )
    asyncio.run(client.check_tokenizer(student))
    # the run's start-up checks in one call: K, the tokenizer, then the context the app tells (of
    # its only model: no endpoint_model)
    only = EndpointTeacherClient(
        "http://teacher", None, default_top_k=5, policy=FAST, transport=client._transport
    )
    context = asyncio.run(only.preflight(5, student))
    assert context.max_context == 512 and only.retries == 0
    with pytest.raises(TopKAboveCapError, match="distill_topk = 600"):  # the first check fails first
        asyncio.run(only.preflight(600, student))


def test_an_endpoint_with_another_tokenizer_fails_the_probe_naming_both(zoo_cache, tmp_path):
    """The teacher's tokenizer with two of the probe's tokens swapped: same vocabulary size, other ids."""
    other = tmp_path / "teacher-other-ids"
    shutil.copytree(zoo_cache / "models" / "teacher", other)
    student = student_tokens(load_tokenizer("student", zoo_cache), "'student'")
    spec = json.loads((other / "tokenizer.json").read_text())
    first, second = student.pieces[0], student.pieces[1]
    vocab = spec["model"]["vocab"]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (other / "tokenizer.json").write_text(json.dumps(spec))
    client = EndpointTeacherClient(
        "http://teacher", "teacher", default_top_k=5, policy=FAST, transport=_zoo_teacher_app(other)
    )
    with pytest.raises(TokenizerMismatchError) as caught:
        asyncio.run(client.check_tokenizer(student))
    assert str(caught.value).startswith(
        "the student's tokenizer 'student' and the endpoint's (model teacher at http://teacher) tokenise "
        "the probe text differently"
    )
    assert (
        f"first difference at token 0: the student has {student.token_ids[0]} ({first!r}), the endpoint {student.token_ids[1]}"
        in str(caught.value)
    )


def test_a_server_without_prompt_token_ids_is_still_held_to_the_students_vocabulary(zoo_cache):
    """A server that sends no ids (older vLLM, SGLang) is checked on the ids of its top-K only."""
    student = student_tokens(load_tokenizer("student", zoo_cache), "'student'")
    entries = {"3": {"logprob": -0.1}, str(student.vocab_size + 7): {"logprob": -2.5}}
    answer = {"choices": [{"index": 0, "prompt_logprobs": [None, entries]}]}
    server = httpx.MockTransport(lambda _: httpx.Response(200, json=answer))
    client = EndpointTeacherClient("http://sglang:30000", None, policy=FAST, transport=server)
    with pytest.raises(TokenizerMismatchError, match=f"ids up to {student.vocab_size + 7} "):
        asyncio.run(client.check_tokenizer(student))


def test_a_probe_answer_without_a_choice_is_named_not_an_index_error(zoo_cache):
    student = student_tokens(load_tokenizer("student", zoo_cache), "'student'")
    server = httpx.MockTransport(lambda _: httpx.Response(200, json={"choices": []}))
    client = EndpointTeacherClient("http://vllm:8000", "teacher", policy=FAST, transport=server)
    with pytest.raises(EndpointAnswerError, match=r"tokenizer probe \(1 prompt\) with 0 choices"):
        asyncio.run(client.check_tokenizer(student))


def test_a_probe_answer_that_is_no_completion_is_named_not_a_validation_error(zoo_cache):
    student = student_tokens(load_tokenizer("student", zoo_cache), "'student'")
    server = httpx.MockTransport(lambda _: httpx.Response(200, json={"choices": 5}))
    client = EndpointTeacherClient("http://vllm:8000", "teacher", policy=FAST, transport=server)
    with pytest.raises(
        EndpointAnswerError,
        match=r"http://vllm:8000/v1/completions answered the tokenizer probe with what is not a completion "
        r"\(1 errors, first: Input should be a valid array at \('choices',\)\)",
    ):
        asyncio.run(client.check_tokenizer(student))
