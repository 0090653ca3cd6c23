"""vLLM cannot be installed on CPU machines: these tests cover our side of the vLLM engine."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from services.errors import ConfigError, InputError
from services.rollout_worker.engines import GenerationParams, make_engine
from services.rollout_worker.engines.vllm_engine import (
    RELOAD_METHOD,
    WORKER_EXTENSION,
    generation_from_output,
    request_seed,
    sampling_kwargs,
    token_prompts,
)
from services.rollout_worker.engines.vllm_worker_extension import WeightReloadExtension

VLLM_MISSING = importlib.util.find_spec("vllm") is None


def request_output(token_ids: list[int], logprobs: list[float] | None, finish: str) -> SimpleNamespace:
    """The shape of a ``vllm.RequestOutput`` with ``n=1`` and ``logprobs=0``."""
    steps = None
    if logprobs is not None:
        steps = [{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(token_ids, logprobs, strict=True)]
    completion = SimpleNamespace(token_ids=token_ids, logprobs=steps, finish_reason=finish)
    return SimpleNamespace(request_id="7", outputs=[completion])


def test_sampling_kwargs_ask_for_the_sampled_tokens_logprob_and_stop_ids():
    params = GenerationParams(max_new_tokens=64, temperature=0.85, seed=3)
    kwargs = sampling_kwargs(params, stop_token_ids=[2], seed=3, index=4)
    assert kwargs == {
        "n": 1,
        "temperature": 0.85,
        "top_p": 1.0,
        "max_tokens": 64,
        "stop_token_ids": [2],
        "logprobs": 0,
        "seed": request_seed(3, 4),
        "detokenize": False,
    }
    seeds = {request_seed(3, i) for i in range(100)} | {request_seed(4, i) for i in range(100)}
    assert len(seeds) == 200


def test_prompts_are_token_prompts():
    assert token_prompts([[1, 2], (3,)]) == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]


def test_request_outputs_become_generations():
    gen = generation_from_output(request_output([5, 9, 2], [-0.5, -1.25, -0.01], "stop"))
    assert (gen.token_ids, gen.logprobs, gen.finish_reason) == ([5, 9, 2], [-0.5, -1.25, -0.01], "stop")
    assert generation_from_output(request_output([5], [-0.5], "length")).finish_reason == "length"


def test_unusable_request_outputs_are_errors():
    with pytest.raises(InputError, match="log-probs"):
        generation_from_output(request_output([5, 9], None, "stop"))
    with pytest.raises(InputError, match="'abort'"):
        generation_from_output(request_output([5], [-0.1], "abort"))


def test_the_worker_extension_loads_weights_into_the_workers_model():
    loaded: list[tuple[str, torch.Tensor]] = []

    class FakeWorker(WeightReloadExtension):  # glue only: vLLM provides model_runner and device
        model_runner = SimpleNamespace(
            model=SimpleNamespace(load_weights=lambda weights: loaded.extend(weights))
        )
        device = torch.device("cpu")

    weights = [("model.norm.weight", torch.ones(3)), ("lm_head.weight", torch.zeros(2, 3))]
    assert getattr(FakeWorker(), RELOAD_METHOD)(weights) == 2
    assert [name for name, _ in loaded] == ["model.norm.weight", "lm_head.weight"]
    assert WORKER_EXTENSION.rsplit(".", 1)[1] == WeightReloadExtension.__name__


@pytest.mark.skipif(not VLLM_MISSING, reason="vLLM is installed")
def test_asking_for_vllm_without_it_says_how_to_fix_it(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"vLLM is not installed.*turnopd\[gpu\]"):
        make_engine("vllm", "student", cache_dir=tmp_path)


def test_unknown_engine_kinds_are_config_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown generation engine"):
        make_engine("sglang", "student", cache_dir=tmp_path)  # type: ignore[arg-type]
