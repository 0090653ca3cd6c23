"""The `teacher` Serve app on a local Ray: HTTP and handle answers equal a direct forward, bad input
is rejected while the replica keeps serving, concurrent clients share batches, and a killed replica
is replaced while the handle client retries its in-flight requests."""

import asyncio

import httpx
import numpy as np
import pytest
import ray
import torch
from ray import serve

from services.contracts.teacher import ScoreRequest, ScoreSequence, TeacherContext
from services.errors import ConfigError, InputError
from services.ray_names import TEACHER_APP as APP_NAME
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.http_client import TeacherHttpClient
from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, cached_random_qwen3
from services.teacher_scorer.retry import RetryPolicy
from services.teacher_scorer.serve_app import build_app
from services.teacher_scorer.transformers_engine import load_teacher_model
from services.teacher_scorer.validation import SequenceTooLongError

TOKEN = "teacher-serve-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.integration

SPEC = RandomQwen3Spec(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, max_context=256, seed=0)
DEFAULT_TOP_K = 5
# Serve's replacement of a dead replica takes seconds; leave the client room for it.
PATIENT = RetryPolicy(max_attempts=8, backoff_s=0.2, max_backoff_s=4.0)


@pytest.fixture(scope="module")
def checkpoint():
    return cached_random_qwen3(SPEC)


@pytest.fixture(scope="module")
def teacher(serve_port, checkpoint, tmp_path_factory):
    """The app deployed as the cluster's Serve config does (builder + TOML); yields (handle, HTTP URL)."""
    config = tmp_path_factory.mktemp("teacher") / "turnopd.toml"
    config.write_text(
        f"[distill]\ndistill_topk = {DEFAULT_TOP_K}\n\n[teacher]\nnum_cpus = 0.5\nbatch_wait_timeout_s = 0.05\n"
        "token_budget = 1024\nmax_batch_tokens = 4096\nhealth_check_period_s = 1.0\n"
        f'\n[security]\nservice_token = "{TOKEN}"\n'  # a Serve config's proxy listens everywhere
    )
    app = build_app({"config_path": str(config), "model_path": str(checkpoint)})
    handle = serve.run(app, name=APP_NAME, route_prefix="/teacher")
    yield handle, f"http://127.0.0.1:{serve_port}/teacher"
    serve.delete(APP_NAME)


def test_builder_arguments_are_checked():
    with pytest.raises(ConfigError, match="teacher app args: bogus: unknown key"):
        build_app({"bogus": "1"})


@pytest.fixture(scope="module")
def reference(checkpoint):
    """Independent reference: the checkpoint loaded here, one unpadded forward, full log-softmax."""
    model = load_teacher_model(checkpoint, "cpu", "float32")

    def logprobs(row: ScoreRow) -> torch.Tensor:
        with torch.no_grad():
            logits = model(torch.as_tensor(row.token_ids_T)[None]).logits[0]
        return torch.log_softmax(logits.double(), -1)[torch.as_tensor(row.positions_P - 1)]

    return logprobs


def _rows(seed: int, lengths: list[int]) -> list[ScoreRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in lengths:
        positions = np.sort(rng.choice(np.arange(1, n), size=max(1, n // 2), replace=False))
        rows.append(ScoreRow(rng.integers(0, SPEC.vocab_size, size=n), positions))
    return rows


def _request(rows: list[ScoreRow], top_k: int | None = None) -> ScoreRequest:
    sequences = [
        ScoreSequence(token_ids=r.token_ids_T.tolist(), positions=r.positions_P.tolist()) for r in rows
    ]
    return (
        ScoreRequest(sequences=sequences) if top_k is None else ScoreRequest(sequences=sequences, top_k=top_k)
    )


def _assert_equal_to_reference(reference, row, top_ids, top_logprobs, token_logprob, entropy, top_k):
    ref = reference(row)
    ref_top, ref_ids = ref.topk(top_k, -1)
    np.testing.assert_array_equal(np.asarray(top_ids), ref_ids.numpy())
    np.testing.assert_allclose(np.asarray(top_logprobs), ref_top.numpy(), atol=1e-4, rtol=0)
    targets = torch.as_tensor(row.token_ids_T[row.positions_P])
    np.testing.assert_allclose(
        np.asarray(token_logprob), ref.gather(-1, targets[:, None])[:, 0], atol=1e-4, rtol=0
    )
    np.testing.assert_allclose(np.asarray(entropy), -(ref.exp() * ref).sum(-1).numpy(), atol=1e-4, rtol=0)


def _stats(handle):
    return handle.stats.remote().result()


def test_http_and_handle_answers_equal_a_direct_forward(teacher, reference):
    handle, url = teacher
    rows = _rows(seed=101, lengths=[7, 40, 3, 25])

    async def both():
        async with TeacherHttpClient(url, policy=PATIENT, token=TOKEN) as http:
            over_http = await http.score(_request(rows, top_k=8))
            http_default = await http.score(_request(rows[:1]))
            assert await http.healthy()
        over_handle = await TeacherHandleClient(handle, policy=PATIENT).score_rows(rows, top_k=8)
        return over_http, http_default, over_handle

    over_http, http_default, over_handle = asyncio.run(both())
    for row, seq, arrays in zip(rows, over_http.results, over_handle, strict=True):
        assert seq.positions == row.positions_P.tolist()
        _assert_equal_to_reference(
            reference, row, seq.top_ids, seq.top_logprobs, seq.token_logprob, seq.entropy, 8
        )
        _assert_equal_to_reference(
            reference,
            row,
            arrays.top_ids_P_K,
            arrays.top_logprobs_P_K,
            arrays.token_logprob_P,
            arrays.entropy_P,
            8,
        )
    # No top_k in the request: the deployment's distill_topk applies.
    assert {len(ids) for ids in http_default.results[0].top_ids} == {DEFAULT_TOP_K}


def test_bad_input_is_rejected_by_name_and_the_replica_keeps_serving(teacher):
    handle, url = teacher
    replica = _stats(handle).replica
    bad_bodies = [
        ({"sequences": [{"token_ids": [1, 512], "positions": [1]}], "top_k": 3}, "token id 512 at index 1"),
        (
            {"sequences": [{"token_ids": [1, 2, 3], "positions": [3]}], "top_k": 3},
            "positions [3] outside [1, 3)",
        ),
        ({"sequences": [{"token_ids": list(range(257)), "positions": [1]}]}, "257 tokens exceed"),
        ({"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 0}, "top_k"),
        ({"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 513}, "top_k must be in [1, 512]"),
    ]
    with httpx.Client(timeout=30, headers=AUTH) as client:
        for body, fragment in bad_bodies:
            response = client.post(f"{url}/v1/score", json=body)
            assert response.status_code == 422, body
            assert fragment in str(response.json()["detail"])

    async def over_handle():
        client = TeacherHandleClient(handle, policy=PATIENT)
        with pytest.raises(InputError, match="token id 600 at index 0"):
            await client.score_rows([ScoreRow(np.array([600, 1]), np.array([1]))], top_k=3)
        with pytest.raises(InputError, match=r"top_k must be in \[1, 512\]"):
            await client.score_rows(_rows(seed=1, lengths=[4]), top_k=1000)
        # the teacher reports its limit, and a refusal as too long names it (typed, over the handle)
        assert await client.limits() == TeacherContext(max_context=SPEC.max_context, token_budget=1024)
        with pytest.raises(
            SequenceTooLongError, match="300 tokens exceed the teacher's context of 256"
        ) as too_long:
            await client.score_rows(_rows(seed=3, lengths=[5, 300]), top_k=3)
        assert (too_long.value.index, too_long.value.context.max_length) == (1, 256)
        return await client.score_rows(_rows(seed=2, lengths=[6]), top_k=3)

    good = asyncio.run(over_handle())
    assert good[0].top_ids_P_K.shape == (3, 3)
    stats = _stats(handle)
    assert stats.replica == replica  # the same replica answered the bad requests and kept serving


def test_concurrent_clients_share_batches(teacher, reference):
    handle, url = teacher
    before = _stats(handle)
    requests = [_rows(seed=200 + i, lengths=[12 + i, 30]) for i in range(16)]

    async def sixteen_clients():
        async with TeacherHttpClient(url, policy=PATIENT, token=TOKEN) as http:
            over_http = [http.score(_request(rows, top_k=4)) for rows in requests[:8]]
            handle_client = TeacherHandleClient(handle, policy=PATIENT)
            over_handle = [handle_client.score_rows(rows, top_k=4) for rows in requests[8:]]
            return await asyncio.gather(*over_http, *over_handle)

    answers = asyncio.run(sixteen_clients())
    for rows, seq in zip(requests[:8], answers[:8], strict=True):
        r = seq.results[1]
        _assert_equal_to_reference(
            reference, rows[1], r.top_ids, r.top_logprobs, r.token_logprob, r.entropy, 4
        )
    for rows, arrays in zip(requests[8:], answers[8:], strict=True):
        a = arrays[0]
        _assert_equal_to_reference(
            reference, rows[0], a.top_ids_P_K, a.top_logprobs_P_K, a.token_logprob_P, a.entropy_P, 4
        )
    after = _stats(handle)
    assert after.requests - before.requests == 16
    assert after.max_batch_requests > 1  # requests of different clients ran in one forward batch
    assert after.batches - before.batches < 16
    metrics = httpx.get(f"{url}/metrics", timeout=30, headers=AUTH).text
    assert "turnopd_teacher_batch_requests_bucket" in metrics


def test_a_killed_replica_is_replaced_and_in_flight_requests_are_retried(teacher, reference):
    handle, _ = teacher
    victim = _stats(handle).replica
    client = TeacherHandleClient(handle, policy=PATIENT)
    stream = [_rows(seed=300 + i, lengths=[40, 60, 20]) for i in range(24)]
    # A request of many sequences takes several batches, so it is surely in flight when the kill lands.
    big = _rows(seed=400, lengths=[250] * 48)
    done: list[int] = []

    async def worker(indices):
        out = []
        for i in indices:
            out.append((i, await client.score_rows(stream[i], top_k=3)))
            done.append(i)
        return out

    async def kill_while_busy():
        while len(done) < 4:
            await asyncio.sleep(0.01)
        big_task = asyncio.create_task(client.score_rows(big, top_k=3))
        while (await handle.stats.remote()).in_flight == 0:
            await asyncio.sleep(0.005)
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
        return await big_task

    async def run_stream():
        *parts, big_answer = await asyncio.gather(
            *(worker(range(w, len(stream), 4)) for w in range(4)), kill_while_busy()
        )
        return [pair for part in parts for pair in part], big_answer

    results, big_answer = asyncio.run(run_stream())
    assert sorted(i for i, _ in results) == list(range(len(stream)))
    assert len(big_answer) == len(big)
    assert client.retries >= 1  # requests in flight on the killed replica were sent again
    for i, arrays in results[::5]:
        row, a = stream[i][0], arrays[0]
        _assert_equal_to_reference(
            reference, row, a.top_ids_P_K, a.top_logprobs_P_K, a.token_logprob_P, a.entropy_P, 3
        )
    a = big_answer[-1]
    _assert_equal_to_reference(
        reference, big[-1], a.top_ids_P_K, a.top_logprobs_P_K, a.token_logprob_P, a.entropy_P, 3
    )
    replacement = _stats(handle).replica
    assert replacement != victim
    assert serve.status().applications[APP_NAME].status == "RUNNING"
