"""Our `teacher` Serve app as an OpenAI-compatible endpoint: the endpoint client's scores equal the
Serve handle path's on the same rows, and a K above the app's cap fails naming both numbers."""

import asyncio

import numpy as np
import pytest
from ray import serve

from services.ray_names import TEACHER_APP as APP_NAME
from services.teacher_scorer.completions_native import codec_kernels
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, TopKAboveCapError
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, cached_random_qwen3
from services.teacher_scorer.retry import RetryPolicy
from services.teacher_scorer.serve_app import build_app

pytestmark = pytest.mark.integration

TOKEN = "teacher-endpoint-test-token"
SPEC = RandomQwen3Spec(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, max_context=256, seed=0)
PATIENT = RetryPolicy(max_attempts=8, backoff_s=0.2, max_backoff_s=4.0)


@pytest.fixture(scope="module")
def teacher(serve_port, tmp_path_factory):
    """The app deployed as the cluster's Serve config does; yields (handle, HTTP base URL)."""
    config = tmp_path_factory.mktemp("teacher") / "turnopd.toml"
    config.write_text(
        "[distill]\ndistill_topk = 5\n\n[teacher]\nnum_cpus = 0.5\nbatch_wait_timeout_s = 0.01\n"
        f'token_budget = 1024\nmax_batch_tokens = 4096\n\n[security]\nservice_token = "{TOKEN}"\n'
    )
    app = build_app({"config_path": str(config), "model_path": str(cached_random_qwen3(SPEC))})
    handle = serve.run(app, name=APP_NAME, route_prefix="/teacher")
    yield handle, f"http://127.0.0.1:{serve_port}/teacher"
    serve.delete(APP_NAME)


def _rows(seed: int, lengths: list[int]) -> list[ScoreRow]:
    """Random sequences scored at every position (what an endpoint always scores)."""
    rng = np.random.default_rng(seed)
    return [ScoreRow(rng.integers(0, SPEC.vocab_size, size=n), np.arange(1, n)) for n in lengths]


def test_endpoint_scores_equal_the_handle_paths_on_the_same_rows(teacher):
    handle, url = teacher
    rows = _rows(seed=37, lengths=[7, 40, 3, 25, 120, 64])
    # the run's default reader (the app writes with the compiled codec too)
    endpoint = EndpointTeacherClient(url, "teacher", api_key=TOKEN, policy=PATIENT, codec=codec_kernels(True))
    handle_client = TeacherHandleClient(handle, policy=PATIENT)

    async def both():
        return await endpoint.score_rows(rows, 20), await handle_client.score_rows(rows, 20)

    over_endpoint, over_handle = asyncio.run(both())
    worst = 0.0
    for e, h in zip(over_endpoint, over_handle, strict=True):
        np.testing.assert_array_equal(e.top_ids_P_K, h.top_ids_P_K)
        np.testing.assert_array_equal(e.token_logprob_P, h.token_logprob_P)
        worst = max(worst, float(np.abs(e.top_logprobs_P_K - h.top_logprobs_P_K).max()))
    assert worst <= 1e-6


def test_k_above_the_apps_cap_fails_naming_both_numbers(teacher):
    _, url = teacher
    endpoint = EndpointTeacherClient(url, None, api_key=TOKEN, policy=PATIENT)
    asyncio.run(endpoint.check_top_k(20))
    with pytest.raises(TopKAboveCapError, match=r"distill_topk = 600 .* at most 512 .*--max-logprobs 600"):
        asyncio.run(endpoint.check_top_k(600))
