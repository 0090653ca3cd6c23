"""Our side of the vLLM rollout engine, without vLLM: requests, outputs, limits, errors, and the weight
reload through a file. ``FakeLLM`` stands in for ``vllm.LLM`` only where vLLM needs a GPU; its
``collective_rpc`` runs our real worker extension on a Hugging Face model shaped like a vLLM one.
tests/unit/vllm_api checks the same code against vLLM's own classes.
"""

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from services.errors import ConfigError, EngineBrokenError, InputError
from services.rollout_worker.actor import _exit_if_broken
from services.rollout_worker.engines import GenerationParams, make_engine
from services.rollout_worker.engines.vllm_engine import (
    RELOAD_METHOD,
    WORKER_EXTENSION,
    VLLMEngine,
    generation_from_output,
    llm_kwargs,
    request_seed,
    sampling_kwargs,
    token_prompts,
)
from services.rollout_worker.engines.vllm_worker_extension import WeightReloadExtension
from services.rollout_worker.engines.weights_file import checkpoint_shapes

VLLM_MISSING = importlib.util.find_spec("vllm") is None


def request_output(token_ids: list[int], logprobs: list[float] | None, finish: str) -> SimpleNamespace:
    """The shape of a ``vllm.RequestOutput`` with ``n=1`` and ``logprobs=0``."""
    steps = None
    if logprobs is not None:
        steps = [{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(token_ids, logprobs, strict=True)]
    completion = SimpleNamespace(token_ids=token_ids, logprobs=steps, finish_reason=finish)
    return SimpleNamespace(request_id="7", outputs=[completion])


class VllmShapedModel:
    """A Hugging Face model behind vLLM's model interface: ``load_weights`` takes (name, tensor)
    pairs and returns the names of the parameters it set; ``skip`` names are never set."""

    def __init__(self, model: torch.nn.Module, skip: frozenset[str] = frozenset()) -> None:
        self.model, self.skip = model, skip

    def named_parameters(self):
        return self.model.named_parameters()

    def load_weights(self, weights):
        params = dict(self.model.named_parameters())
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name in params and name not in self.skip:
                    params[name].copy_(tensor)
                    loaded.add(name)
        return loaded


class FakeWorker(WeightReloadExtension):
    def __init__(self, model: VllmShapedModel) -> None:
        self.model_runner = SimpleNamespace(get_model=lambda: model)


class FakeLLM:
    """The parts of ``vllm.LLM`` the engine calls."""

    def __init__(self, model: VllmShapedModel, max_model_len: int = 64) -> None:
        self.model_config = SimpleNamespace(max_model_len=max_model_len)
        self.worker = FakeWorker(model)
        self.rpc_args: list[tuple] = []
        self.files_seen: list[bool] = []
        self.resets = 0
        self.generate_error: Exception | None = None
        self.generated: list[tuple] = []

    def collective_rpc(self, method, args=()):
        self.rpc_args.append(args)
        self.files_seen.append(Path(args[0]["path"]).is_file())
        return [getattr(self.worker, method)(*args)]

    def reset_prefix_cache(self):
        self.resets += 1
        return True

    def generate(self, prompts, params, use_tqdm=True):
        if self.generate_error is not None:
            raise self.generate_error
        self.generated.append((prompts, params))
        return [request_output([5, 2], [-0.5, -0.1], "stop") for _ in prompts]


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    from tiny_models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path / "ckpt", seed=3)


def make(checkpoint: Path, tmp_path: Path, skip: frozenset[str] = frozenset()) -> tuple[VLLMEngine, FakeLLM]:
    from services.models.loading import load_causal_lm

    llm = FakeLLM(VllmShapedModel(load_causal_lm(str(checkpoint)), skip))
    engine = VLLMEngine(
        llm,
        dict,
        stop_token_ids=[2],
        vocab_size=64,
        checkpoint_weights=checkpoint_shapes(checkpoint),
        tied_embeddings=True,
        weights_dtype=torch.bfloat16,
        staging=[tmp_path],
    )
    return engine, llm


def perturbed_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    from services.models.loading import load_causal_lm

    other = load_causal_lm(str(checkpoint))
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p))
    state = other.state_dict()
    state.pop("lm_head.weight")  # tied: the learner leaves it out
    return state


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


def test_llm_kwargs_ask_for_processed_logprobs_and_the_worker_extension():
    kwargs = llm_kwargs(Path("/m"), dtype="bfloat16", seed=4, gpu_memory_utilization=0.4, max_model_len=None)
    assert kwargs["model"] == "/m" and kwargs["logprobs_mode"] == "processed_logprobs"
    assert kwargs["worker_extension_cls"] == WORKER_EXTENSION and kwargs["skip_tokenizer_init"] is True
    assert WORKER_EXTENSION.rsplit(".", 1)[1] == WeightReloadExtension.__name__


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


def test_weights_reach_the_workers_model_through_a_file_and_only_the_path_crosses(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path)
    state = perturbed_state(checkpoint)
    engine.load_weights(state, 1)
    [(message,)] = llm.rpc_args
    assert set(message) == {"path", "version"} and message["version"] == 1  # a plain dict, no tensors
    assert llm.files_seen == [True] and not Path(message["path"]).exists()  # removed after the load
    assert list(tmp_path.glob("turnopd-weights-*")) == []
    loaded = dict(llm.worker.model_runner.get_model().named_parameters())
    for name, tensor in state.items():
        assert torch.equal(loaded[name], tensor.to(torch.bfloat16).float()), name
    assert (engine.weights_version, llm.resets) == (1, 1)


def test_weights_that_do_not_fit_are_refused_before_anything_changes(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path)
    state = perturbed_state(checkpoint)
    state.pop("model.norm.weight")
    with pytest.raises(InputError, match=r"1 missing \['model.norm.weight'\]"):
        engine.load_weights(state, 1)
    assert (llm.rpc_args, llm.resets, engine.weights_version) == ([], 0, 0)


def test_a_partial_load_breaks_the_engine_and_keeps_the_old_version(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path, skip=frozenset({"model.layers.1.mlp.up_proj.weight"}))
    with pytest.raises(EngineBrokenError, match=r"left 1 parameters at older weights.*up_proj"):
        engine.load_weights(perturbed_state(checkpoint), 1)
    assert (engine.weights_version, llm.resets) == (0, 0)  # no cache reset, no new version
    with pytest.raises(EngineBrokenError, match=r"unusable.*restart the worker"):
        engine.generate([[3, 4]], GenerationParams(max_new_tokens=2))


def test_a_failed_reload_call_breaks_the_engine(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path)

    def fail(method, args=()):
        raise Exception("Call to collective_rpc method failed: CUDA error")

    llm.collective_rpc = fail
    with pytest.raises(EngineBrokenError, match="CUDA error"):
        engine.load_weights(perturbed_state(checkpoint), 1)
    assert engine.weights_version == 0 and list(tmp_path.glob("turnopd-weights-*")) == []


def test_generate_checks_vllms_limits_before_calling_it(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path)
    assert engine.max_positions == 64  # read from the engine's model_config
    for temperature in (2.5, 0.005):
        with pytest.raises(InputError, match=r"temperature: vLLM samples at 0 \(greedy\) or in \[0.01, 2\]"):
            engine.generate([[3, 4]], GenerationParams(max_new_tokens=2, temperature=temperature))
    with pytest.raises(InputError, match=r"prompts \[1\] leave no room for a response .* context of 64"):
        engine.generate([[3] * 63, [3] * 64], GenerationParams(max_new_tokens=2))
    assert llm.generated == []
    [generation] = engine.generate([[3] * 63], GenerationParams(max_new_tokens=2, temperature=2.0))
    assert generation.token_ids == [5, 2]
    [params] = llm.generated[0][1]
    assert params["temperature"] == 2.0 and params["logprobs"] == 0


def test_vllm_errors_become_input_errors_or_a_broken_engine(checkpoint, tmp_path):
    engine, llm = make(checkpoint, tmp_path)
    llm.generate_error = ValueError("The decoder prompt (length 64) is longer than the maximum model length")
    with pytest.raises(InputError, match="vLLM rejected the request: The decoder prompt"):
        engine.generate([[3, 4]], GenerationParams(max_new_tokens=2))
    llm.generate_error = RuntimeError("EngineCore encountered an issue")
    with pytest.raises(EngineBrokenError, match="vLLM generate failed: RuntimeError: EngineCore"):
        engine.generate([[3, 4]], GenerationParams(max_new_tokens=2))
    llm.generate_error = None
    with pytest.raises(EngineBrokenError, match="unusable"):
        engine.generate([[3, 4]], GenerationParams(max_new_tokens=2))


def test_a_broken_engine_ends_the_worker_process_so_ray_restarts_it(monkeypatch):
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    assert _exit_if_broken("rollout-worker-0", lambda: 5) == 5
    with pytest.raises(InputError):
        _exit_if_broken("rollout-worker-0", lambda: (_ for _ in ()).throw(InputError("bad")))
    with pytest.raises(SystemExit):
        _exit_if_broken("rollout-worker-0", lambda: (_ for _ in ()).throw(EngineBrokenError("dead")))
    assert exits == [1]
    assert WeightReloadExtension.turnopd_load_weights.__name__ == RELOAD_METHOD


@pytest.mark.skipif(not VLLM_MISSING, reason="vLLM is installed")
def test_asking_for_vllm_without_it_says_how_to_fix_it(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"vLLM is not installed.*turnopd\[gpu\]"):
        make_engine("vllm", "student", cache_dir=tmp_path)


def test_unknown_engine_kinds_are_config_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="unknown generation engine"):
        make_engine("sglang", "student", cache_dir=tmp_path)  # type: ignore[arg-type]
