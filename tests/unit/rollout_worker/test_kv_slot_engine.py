"""The KV-slot path of the transformers engine against fresh full-sequence forwards of the same model."""

import random
from pathlib import Path

import pytest
import torch

from services.models.loading import load_causal_lm
from services.rollout_worker.engines import GenerationParams
from services.rollout_worker.engines.transformers_engine import TransformersEngine


@pytest.fixture(scope="module")
def model(zoo_cache: Path):
    return load_causal_lm("student", cache_dir=zoo_cache)


def slot_engine(
    model, budget: int = 64 << 20, stop: int | None = None, native: bool = True
) -> TransformersEngine:
    """The KV-slot path, with the compiled decode kernels (``native``; this machine has a compiler, so
    they must build) or torch's ops."""
    vocab = model.config.vocab_size
    engine = TransformersEngine(
        model,
        [vocab - 1 if stop is None else stop],
        pad_token_id=0,
        prefix_cache_bytes=budget,
        native_kernels=native,
    )
    assert engine.unsupported is None and engine.slots is not None
    assert (engine.kernels is not None) == native
    return engine


def full_forward_logprobs(model, prompt: list[int], generated: list[int], temperature: float) -> torch.Tensor:
    """``log_softmax(logits / T)`` of a fresh, unpadded, cache-free forward, at each generated token."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + generated])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits / (temperature or 1.0), dim=-1)


def play_turns(engine: TransformersEngine, turns: int, temperature: float, check) -> list[list[int]]:
    """Three episodes whose prompts grow by their response and a random observation every turn."""
    rng = random.Random(0)
    vocab = engine.model.config.vocab_size
    conversations = [[rng.randrange(3, vocab) for _ in range(n)] for n in (30, 7, 55)]
    for turn in range(turns):
        params = GenerationParams(max_new_tokens=12 + 4 * turn, temperature=temperature, seed=turn)
        before = engine.prefilled_tokens
        gens = engine.generate(conversations, params)
        # after the first turn, only each observation and the last sampled token were prefilled
        if turn and engine.slots is not None:
            assert engine.prefilled_tokens - before == sum(10 for _ in conversations)
        for conversation, gen in zip(conversations, gens, strict=True):
            check(conversation, gen)
            conversation.extend(gen.token_ids + [rng.randrange(3, vocab) for _ in range(9)])
    return conversations


@pytest.mark.parametrize("native", [True, False], ids=["kernels", "torch-ops"])
def test_greedy_turns_reusing_their_slots_equal_a_full_forwards_argmax(model, native: bool):
    engine = slot_engine(model, native=native)

    def check(prompt, gen):
        assert gen.token_ids == full_forward_logprobs(model, prompt, gen.token_ids, 0.0).argmax(-1).tolist()

    play_turns(engine, turns=5, temperature=0.0, check=check)


@pytest.mark.parametrize("native", [True, False], ids=["kernels", "torch-ops"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_recorded_logprobs_equal_a_full_forwards_log_softmax(model, temperature: float, native: bool):
    engine = slot_engine(model, native=native)

    def check(prompt, gen):
        steps_T_V = full_forward_logprobs(model, prompt, gen.token_ids, temperature)
        expected = steps_T_V.gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(gen.logprobs), expected, atol=1e-5, rtol=0)

    play_turns(engine, turns=4, temperature=temperature, check=check)


def test_the_slot_path_and_the_hugging_face_path_generate_the_same_greedy_tokens(model):
    slots, hf = (
        slot_engine(model),
        TransformersEngine(model, [model.config.vocab_size - 1], 0, kv_slots=False),
    )
    assert hf.slots is None and hf.unsupported == "kv_slots=False"
    greedy: list[list[list[int]]] = [[], []]
    for engine, record in zip((slots, hf), greedy, strict=True):
        play_turns(
            engine, turns=3, temperature=0.0, check=lambda _, gen, out=record: out.append(gen.token_ids)
        )
    assert greedy[0] == greedy[1]


def test_new_weights_mid_run_empty_every_slot_and_the_next_turn_prefills_in_full(zoo_cache: Path):
    engine = TransformersEngine.from_pretrained("student", cache_dir=zoo_cache, prefix_cache_mb=16)
    rng = random.Random(3)
    conversations = [[rng.randrange(3, 500) for _ in range(n)] for n in (20, 33)]
    greedy = GenerationParams(max_new_tokens=6, temperature=0.0)
    for conversation, gen in zip(conversations, engine.generate(conversations, greedy), strict=True):
        conversation.extend([*gen.token_ids, 7, 8])
    assert engine.slots is not None and engine.slots.held_tokens > 0
    state = {name: value + 0.3 * torch.randn_like(value) for name, value in engine.model.state_dict().items()}
    engine.load_weights(state, version=1)
    assert engine.slots.held_tokens == 0
    before = engine.prefilled_tokens
    gens = engine.generate(conversations, greedy)
    assert engine.prefilled_tokens - before == sum(len(c) for c in conversations)
    for conversation, gen in zip(conversations, gens, strict=True):  # no state of the old weights was read
        expected = full_forward_logprobs(engine.model, conversation, gen.token_ids, 0.0).argmax(-1).tolist()
        assert gen.token_ids == expected


def test_weights_changed_in_place_behind_the_engines_back_are_noticed(zoo_cache: Path):
    model = load_causal_lm("student", cache_dir=zoo_cache)
    engine = slot_engine(model)
    prompt = list(range(3, 40))
    gen = engine.generate([prompt], GenerationParams(max_new_tokens=4, temperature=0.0))[0]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5)
    follow_up = prompt + gen.token_ids + [5]
    before = engine.prefilled_tokens
    again = engine.generate([follow_up], GenerationParams(max_new_tokens=4, temperature=0.0))[0]
    assert engine.prefilled_tokens - before == len(follow_up)
    assert (
        again.token_ids == full_forward_logprobs(model, follow_up, again.token_ids, 0.0).argmax(-1).tolist()
    )


def test_episodes_ending_at_different_turns_free_their_slots_and_memory_stays_bounded(model):
    """100 episodes, four in play at a time, each ending after 1-6 turns (as the agent loop plays)."""
    engine = slot_engine(model, stop=3)  # a frequent stop token: responses end at different steps
    assert engine.slots is not None
    rng = random.Random(1)
    vocab = model.config.vocab_size
    waiting = [
        ([rng.randrange(4, vocab) for _ in range(rng.randrange(5, 40))], rng.randint(1, 6))
        for _ in range(100)
    ]
    playing: list[tuple[list[int], int]] = []
    peak_bytes, calls = 0, 0
    while waiting or playing:
        while waiting and len(playing) < 4:
            playing.append(waiting.pop())
        params = GenerationParams(max_new_tokens=rng.randint(4, 16), temperature=1.0, seed=calls)
        gens = engine.generate([conversation for conversation, _ in playing], params)
        calls += 1
        assert len(engine.slots) <= 4
        held = sum(
            len(conversation) + len(gen.token_ids) - 1
            for (conversation, _), gen in zip(playing, gens, strict=True)
        )
        assert engine.slots.held_tokens == held  # exactly the running episodes' states, nothing older
        peak_bytes = max(peak_bytes, engine.slots.nbytes)
        still = []
        for (conversation, turns_left), gen in zip(playing, gens, strict=True):
            if turns_left > 1:
                still.append(
                    (
                        conversation + gen.token_ids + [rng.randrange(4, vocab) for _ in range(5)],
                        turns_left - 1,
                    )
                )
        playing = still
    engine.generate([[5, 6, 7]], GenerationParams(max_new_tokens=2, seed=0))
    assert engine.slots.held_tokens <= 3 + 1  # the one sequence of this call; every episode's slot was freed
    longest = 40 + 6 * (16 + 5)
    assert peak_bytes <= 4 * engine.slots.shape.nbytes(2 * longest + 512)
