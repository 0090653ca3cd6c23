"""Our vLLM engines against vLLM's own code (the version the ``gpu`` extra pins), on a CPU.

Runs where vLLM imports (a side install, docs/vllm.md), and is skipped elsewhere: CI never needs
vLLM. vLLM's CUDA wheel finds no platform on a machine without a GPU, so the module selects vLLM's
CPU platform (VLLM_TARGET_DEVICE=cpu), which lets its configs and model classes build. Nothing here
runs a forward pass: vLLM's kernels need its compiled extension, built for the torch it pins
(bench/gpu_check.py does that part on a GPU).
"""

import os
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
pytest.importorskip("vllm.v1.engine.core", reason="vLLM is not importable here (side install: docs/vllm.md)")

from vllm import SamplingParams
from vllm.engine.arg_utils import EngineArgs
from vllm.exceptions import VLLMClientError, VLLMValidationError
from vllm.logprobs import append_logprobs_for_next_position, create_prompt_logprobs
from vllm.v1.engine import EngineCoreOutputs, UtilityOutput
from vllm.v1.engine.core import EngineCore, EngineCoreProc
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError
from vllm.v1.engine.input_processor import InputProcessor
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder, UtilityResult, run_method

from services.errors import EngineBrokenError, InputError
from services.rollout_worker.engines.base import GenerationParams
from services.rollout_worker.engines.vllm_engine import (
    RELOAD_METHOD,
    WORKER_EXTENSION,
    llm_kwargs,
    load_reports,
    request_seed,
    sampling_kwargs,
)
from services.rollout_worker.engines.vllm_worker_extension import WeightReloadExtension
from services.rollout_worker.engines.weights_file import write_weights
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.validation import TeacherLimits, validate_row, validate_top_k
from services.teacher_scorer.vllm_engine import (
    VllmEngine,
    convert_prompt_logprobs,
    scoring_kwargs,
    teacher_llm_kwargs,
)
from services.vllm_support.errors import request_error_types, translate
from services.vllm_support.limits import (
    MIN_POSITIVE_TEMPERATURE,
    prompt_fits,
    scoring_max_model_len,
    temperature_problem,
)

pytestmark = pytest.mark.vllm
MAX_POSITIONS = 256  # the tiny checkpoint's max_position_embeddings


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from tiny_models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("vllm") / "tiny", seed=5)


@pytest.fixture(scope="module")
def rollout_config(checkpoint):
    kwargs = llm_kwargs(checkpoint, dtype="float32", seed=0, gpu_memory_utilization=0.5, max_model_len=None)
    return EngineArgs(**kwargs).create_engine_config()


@pytest.fixture(scope="module")
def vllm_model(rollout_config):
    """vLLM's own Qwen3ForCausalLM over the tiny checkpoint's config (random weights), on the CPU."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.model_executor.model_loader.reload import record_metadata_for_reloading
    from vllm.model_executor.model_loader.utils import process_weights_after_loading
    from vllm.model_executor.models.qwen3 import Qwen3ForCausalLM

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with set_current_vllm_config(rollout_config):
        parallel_state.init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{port}",
            local_rank=0,
            backend="gloo",
        )
        parallel_state.initialize_model_parallel(1, 1)
        # as vLLM's loader builds a model: metadata recorded (a reload restores from it), then processed
        # into its kernels' format (the CPU backend repacks each linear weight and empties the parameter)
        model = Qwen3ForCausalLM(vllm_config=rollout_config)
        record_metadata_for_reloading(model)
        process_weights_after_loading(model, rollout_config.model_config, torch.device("cpu"))
    yield model
    parallel_state.destroy_model_parallel()
    parallel_state.destroy_distributed_environment()


class ExtendedWorker(WeightReloadExtension):
    """What vLLM makes of its GPU Worker with our extension mixed in, minus the GPU."""

    def __init__(self, model, config) -> None:
        self.model_runner = SimpleNamespace(get_model=lambda: model)
        self.vllm_config = config


def hf_state(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(checkpoint / "model.safetensors")


def test_rollout_requests_are_vllm_sampling_params():
    params = SamplingParams(**sampling_kwargs(GenerationParams(64, 0.85, seed=3), [2, 7], seed=3, index=4))
    assert (params.n, params.temperature, params.top_p, params.top_k) == (1, 0.85, 1.0, 0)
    assert (params.max_tokens, params.logprobs, params.detokenize) == (64, 0, False)
    assert (params.stop_token_ids, params.seed) == ([2, 7], request_seed(3, 4))


@pytest.mark.parametrize("temperature", [0.0, 0.005, 0.01, 1.0, 2.0, 2.0001, 3.0])
def test_the_temperatures_we_accept_are_those_vllm_samples_at_exactly(temperature):
    try:
        sampled_at = SamplingParams(temperature=temperature).temperature
    except VLLMValidationError as exc:
        assert isinstance(translate(exc, "x"), InputError)
        sampled_at = None
    assert (temperature_problem(temperature) is None) == (sampled_at == temperature)
    import vllm.sampling_params

    assert vllm.sampling_params._MAX_TEMP == MIN_POSITIVE_TEMPERATURE


def test_the_rollout_engine_args_build_vllms_engine_config(rollout_config):
    assert rollout_config.model_config.logprobs_mode == "processed_logprobs"
    assert rollout_config.model_config.skip_tokenizer_init is True
    assert rollout_config.model_config.max_model_len == MAX_POSITIONS
    assert rollout_config.cache_config.enable_prefix_caching is True
    assert rollout_config.parallel_config.worker_extension_cls == WORKER_EXTENSION
    from vllm.utils.import_utils import resolve_obj_by_qualname
    from vllm.v1.worker.gpu_worker import Worker

    assert resolve_obj_by_qualname(WORKER_EXTENSION) is WeightReloadExtension
    # vLLM refuses an extension whose attributes clash with its Worker's (worker_base.py)
    assert [a for a in dir(WeightReloadExtension) if not a.startswith("__") and hasattr(Worker, a)] == []


def test_the_prompt_length_rule_is_vllms(rollout_config):
    model_config = rollout_config.model_config
    processor = SimpleNamespace(
        model_config=model_config, skip_prompt_length_check=False, supports_mm_inputs=False
    )
    for length in (1, MAX_POSITIONS - 1, MAX_POSITIONS, MAX_POSITIONS + 1):
        try:
            InputProcessor._validate_prompt_len(processor, length, "decoder")  # type: ignore[arg-type]
            accepted = True
        except VLLMValidationError as exc:
            assert isinstance(translate(exc, "generate"), InputError)
            accepted = False
        assert accepted == prompt_fits(length, model_config.max_model_len) == (length < MAX_POSITIONS)


def test_the_teacher_scores_up_to_its_context_and_vllm_agrees(checkpoint):
    settings = TeacherSettings(dtype="float32", vllm_max_logprobs=20)
    max_model_len = scoring_max_model_len(settings.max_context, MAX_POSITIONS)
    model_config = EngineArgs(**teacher_llm_kwargs(settings, checkpoint, max_model_len)).create_model_config()
    assert (model_config.max_model_len, model_config.max_logprobs) == (MAX_POSITIONS, 20)
    engine = VllmEngine(
        SimpleNamespace(model_config=model_config), SamplingParams, vocab_size=64, max_logprobs=20
    )
    assert (engine.max_context, engine.max_top_k) == (MAX_POSITIONS - 1, 20)
    limits = TeacherLimits(vocab_size=64, max_context=engine.max_context, token_budget=4096, max_top_k=20)
    processor = SimpleNamespace(
        model_config=model_config, skip_prompt_length_check=False, supports_mm_inputs=False
    )
    for length in (MAX_POSITIONS - 2, MAX_POSITIONS - 1, MAX_POSITIONS):
        try:
            InputProcessor._validate_prompt_len(processor, length, "decoder")  # type: ignore[arg-type]
            vllm_accepts = True
        except VLLMValidationError:
            vllm_accepts = False
        try:
            validate_row(0, ScoreRow(np.arange(length) % 64, np.array([1])), limits)
            we_accept = True
        except InputError:
            we_accept = False
        assert we_accept == vllm_accepts == (length < MAX_POSITIONS), length
    for top_k in (20, 21):
        params = SamplingParams(**scoring_kwargs(top_k, flat=True))
        assert params.flat_logprobs is True and params.skip_reading_prefix_cache is True
        try:
            params._validate_logprobs(model_config)
            vllm_accepts = True
        except VLLMValidationError:
            vllm_accepts = False
        try:
            validate_top_k(top_k, limits)
            we_accept = True
        except InputError:
            we_accept = False
        assert we_accept == vllm_accepts == (top_k <= 20)


def test_a_weight_update_crosses_vllms_engine_core_messages_and_loads(
    checkpoint, rollout_config, vllm_model, tmp_path
):
    state = hf_state(checkpoint)
    update = write_weights(state, tmp_path, version=4)
    # SyncMPClient.call_utility("collective_rpc", method, timeout, args, kwargs) -> the engine core
    frames = MsgpackEncoder().encode(
        (0, 77, "collective_rpc", (RELOAD_METHOD, None, (update.model_dump(),), None))
    )
    client_index, call_id, method_name, args = MsgpackDecoder().decode(frames)
    assert (client_index, call_id, method_name) == (0, 77, "collective_rpc")
    method, _, rpc_args, rpc_kwargs = EngineCoreProc._convert_msgspec_args(EngineCore.collective_rpc, args)
    assert rpc_args == [{"path": update.path, "version": 4}]
    worker = ExtendedWorker(vllm_model, rollout_config)
    result = run_method(worker, method, tuple(rpc_args), rpc_kwargs or {})
    # the engine core wraps the answer in a UtilityOutput; the client decodes it typed
    reply = EngineCoreOutputs(utility_output=UtilityOutput(call_id, result=UtilityResult([result])))
    decoded = MsgpackDecoder(EngineCoreOutputs).decode(MsgpackEncoder().encode(reply))
    [report] = load_reports(decoded.utility_output.result.result, 4)
    params = dict(vllm_model.named_parameters())
    assert report.complete and report.loaded == len(params)
    assert torch.equal(params["model.embed_tokens.weight"], state["model.embed_tokens.weight"])
    # vLLM stacks q, k and v; on the CPU the stacked weight lives in its GEMM kernel's packed form
    layer = vllm_model.model.layers[1].self_attn.qkv_proj
    q, k, v = (state[f"model.layers.1.self_attn.{n}_proj.weight"] for n in "qkv")
    x = torch.randn(3, q.shape[1])
    got = layer.quant_method.apply(layer, x)
    assert torch.allclose(got, x @ torch.cat([q, k, v]).T, atol=1e-5)


def test_tensors_and_contract_objects_do_not_cross_the_engine_core_boundary(checkpoint):
    """Why only a dict with a path is sent: vLLM's decoder has no type for the arguments."""
    from services.contracts.weights import WeightsUpdate

    weight = hf_state(checkpoint)["model.norm.weight"].to(torch.bfloat16)
    frames = MsgpackEncoder().encode(
        (0, 1, "collective_rpc", (RELOAD_METHOD, None, ([("w", weight)],), None))
    )
    [(name, arrived)] = MsgpackDecoder().decode(frames)[3][2][0]
    assert name == "w" and not isinstance(arrived, torch.Tensor)
    assert arrived[:2] == ["bfloat16", [32]]
    with pytest.raises(TypeError, match="not serializable"):
        MsgpackEncoder().encode(
            (0, 1, "collective_rpc", (RELOAD_METHOD, None, (WeightsUpdate(path="/x", version=1),), None))
        )


def test_a_load_that_leaves_parameters_out_is_reported(checkpoint, rollout_config, vllm_model, tmp_path):
    state = hf_state(checkpoint)
    state.pop("model.layers.0.mlp.down_proj.weight")
    worker = ExtendedWorker(vllm_model, rollout_config)
    report = getattr(worker, RELOAD_METHOD)(write_weights(state, tmp_path, version=5).model_dump())
    assert report["not_loaded"] == ["model.layers.0.mlp.down_proj.weight"]
    with pytest.raises(EngineBrokenError, match="left 1 parameters at older weights"):
        load_reports([report], 5)
    # a missing shard of a stacked parameter still counts the parameter as loaded in vLLM's names:
    # the engine's check of the Hugging Face names before the load is what catches it
    state = hf_state(checkpoint)
    state.pop("model.layers.0.self_attn.q_proj.weight")
    report = getattr(worker, RELOAD_METHOD)(write_weights(state, tmp_path, version=6).model_dump())
    assert report["not_loaded"] == []


def test_vllms_exceptions_map_by_class():
    assert VLLMClientError in request_error_types()
    bad = translate(
        VLLMValidationError("temperature must be in [0, 2], got 3.0.", parameter="temperature"), "score"
    )
    assert isinstance(bad, InputError) and "parameter=temperature" in str(bad)
    dead = translate(EngineDeadError(), "vLLM generate")
    assert isinstance(dead, EngineBrokenError) and "EngineCore encountered an issue" in str(dead)
    assert isinstance(translate(EngineGenerateError("boom"), "vLLM generate"), EngineBrokenError)
    rpc = translate(Exception("Call to collective_rpc method failed: CUDA error"), "reload")
    assert isinstance(rpc, EngineBrokenError)


def test_vllms_flat_prompt_logprobs_convert_like_its_lists():
    row = ScoreRow(np.array([4, 2, 3]), np.array([1, 2]))
    flat, listed = create_prompt_logprobs(True), create_prompt_logprobs(False)
    positions = [(2, [2, 7], [-0.2, -1.9], 1), (3, [9, 7], [-0.3, -1.1], 5)]
    for actual, top_ids, top_lps, rank in positions:
        actual_lp = top_lps[top_ids.index(actual)] if actual in top_ids else -4.0
        for logprobs in (flat, listed):
            append_logprobs_for_next_position(
                logprobs, [actual, *top_ids], [actual_lp, *top_lps], [None] * 3, rank, 2
            )
    assert type(flat).__name__ == "FlatLogprobs" and len(flat) == 3
    a, b = convert_prompt_logprobs(flat, row, 2), convert_prompt_logprobs(listed, row, 2)
    np.testing.assert_array_equal(a.top_ids_P_K, [[2, 7], [9, 7]])
    np.testing.assert_allclose(a.token_logprob_P, [-0.2, -4.0])
    for x, y in zip(a.__dict__.values(), b.__dict__.values(), strict=True):
        np.testing.assert_array_equal(x, y)
