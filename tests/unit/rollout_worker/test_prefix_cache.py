import random
from pathlib import Path

import pytest
import torch

from services.rollout_worker.engines import GenerationParams
from services.rollout_worker.engines.prefix_cache import CachedPrefix, PrefixKVStore, stack_prefixes
from services.rollout_worker.engines.transformers_engine import TransformersEngine


def entry(ids: list[int], fill: float = 1.0) -> CachedPrefix:
    """Two layers, one head, head dim 2: 2 * 2 * len(ids) * 2 floats."""
    states = [torch.full((1, len(ids), 2), fill) for _ in range(2)]
    return CachedPrefix(tuple(ids), states, [s.clone() for s in states])


def test_lookup_finds_the_longest_proper_prefix():
    store = PrefixKVStore(max_bytes=1 << 20)
    store.add(entry([1, 2]))
    store.add(entry([1, 2, 3, 4]))
    store.add(entry([9, 9, 9]))
    hit = store.lookup([1, 2, 3, 4, 5])
    assert hit is not None and hit.token_ids == (1, 2, 3, 4)
    hit = store.lookup([1, 2, 3, 4])  # a prompt must keep at least one token to prefill
    assert hit is not None and hit.token_ids == (1, 2)
    assert store.lookup([2, 1, 3]) is None


def test_least_recently_used_entries_go_first_when_over_budget():
    one = entry([1, 2, 3]).nbytes  # 96 bytes
    store = PrefixKVStore(max_bytes=2 * one)
    store.add(entry([1, 2, 3]))
    store.add(entry([4, 5, 6]))
    assert store.lookup([1, 2, 3, 7]) is not None  # touch: [4, 5, 6] is now the oldest
    store.add(entry([7, 8, 9]))
    assert (len(store), store.nbytes) == (2, 2 * one)
    assert store.lookup([4, 5, 6, 0]) is None
    assert store.lookup([1, 2, 3, 0]) is not None
    store.add(entry(list(range(100))))  # bigger than the whole budget: not stored
    assert len(store) == 2
    store.add(entry([1, 2, 3], fill=5.0))  # same tokens: replaced, not duplicated
    assert len(store) == 2 and store.lookup([1, 2, 3, 0]).keys[0][0, 0, 0] == 5.0
    store.clear()
    assert (len(store), store.nbytes) == (0, 0)


def test_stacked_prefixes_are_right_aligned_with_zero_padding():
    layers = stack_prefixes([entry([1, 2], 3.0), None, entry([1, 2, 3, 4], 4.0)], width=4)
    keys, values = layers[0]
    assert keys.shape == (3, 1, 4, 2)
    assert keys[0, 0, :, 0].tolist() == [0.0, 0.0, 3.0, 3.0]
    assert keys[1].abs().sum() == 0
    assert values[2, 0, :, 0].tolist() == [4.0] * 4


@pytest.fixture(scope="module")
def engines(zoo_cache: Path) -> tuple[TransformersEngine, TransformersEngine]:
    plain = TransformersEngine.from_pretrained("student", cache_dir=zoo_cache, prefix_cache_mb=0)
    cached = TransformersEngine(
        plain.model, plain.stop_token_ids, pad_token_id=0, prefix_cache_bytes=64 << 20
    )
    return plain, cached


def play(
    engine: TransformersEngine, turns: int, temperature: float
) -> tuple[list[list[int]], list[list[float]]]:
    """Episodes whose prompts grow by the response and a random observation every turn."""
    rng = random.Random(0)
    vocab = engine.model.config.vocab_size
    conversations = [[rng.randrange(3, vocab) for _ in range(n)] for n in (30, 7, 55)]
    logprobs: list[list[float]] = [[] for _ in conversations]
    for turn in range(turns):
        params = GenerationParams(max_new_tokens=10 + 5 * turn, temperature=temperature, seed=turn)
        for conversation, lps, gen in zip(
            conversations, logprobs, engine.generate(conversations, params), strict=True
        ):
            conversation.extend(gen.token_ids)
            lps.extend(gen.logprobs)
            conversation.extend(rng.randrange(3, vocab) for _ in range(rng.randint(1, 12)))
    return conversations, logprobs


def test_reusing_prefixes_prefills_less_and_changes_nothing(engines):
    plain, cached = engines
    plain_before, cached_before = plain.prefilled_tokens, cached.prefilled_tokens
    greedy_plain, _ = play(plain, turns=4, temperature=0.0)
    greedy_cached, _ = play(cached, turns=4, temperature=0.0)
    assert greedy_cached == greedy_plain
    # The plain engine prefilled every prompt in full.
    assert cached.prefilled_tokens - cached_before < (plain.prefilled_tokens - plain_before) / 2


def test_logprobs_with_reused_prefixes_equal_an_independent_forward_pass(engines):
    _, cached = engines
    rng = random.Random(5)
    vocab = cached.model.config.vocab_size
    conversations = [[rng.randrange(3, vocab) for _ in range(n)] for n in (12, 40)]
    for turn in range(3):
        gens = cached.generate(conversations, GenerationParams(max_new_tokens=12, seed=turn))
        for conversation, gen in zip(conversations, gens, strict=True):
            with torch.no_grad():
                logits = cached.model(torch.tensor([conversation + gen.token_ids])).logits[0]
            steps = logits[len(conversation) - 1 : -1].log_softmax(-1)
            ref = steps.gather(-1, torch.tensor(gen.token_ids)[:, None]).squeeze(-1)
            torch.testing.assert_close(torch.tensor(gen.logprobs), ref, atol=2e-4, rtol=0)
            conversation.extend(gen.token_ids + [rng.randrange(3, vocab) for _ in range(9)])


def test_new_weights_drop_the_cached_states(zoo_cache: Path):
    engine = TransformersEngine.from_pretrained("student", cache_dir=zoo_cache, prefix_cache_mb=16)
    prompt = list(range(3, 40))
    gen = engine.generate([prompt], GenerationParams(max_new_tokens=4, seed=0))[0]
    follow_up = prompt + gen.token_ids + [5, 6]
    engine.generate([follow_up], GenerationParams(max_new_tokens=1, seed=0))
    assert engine.prefilled_tokens == len(prompt) + 3  # 2 observation tokens + the last sampled one
    engine.load_weights(engine.model.state_dict(), version=1)
    engine.generate([follow_up], GenerationParams(max_new_tokens=1, seed=0))
    assert engine.prefilled_tokens == len(prompt) + 3 + len(follow_up)
