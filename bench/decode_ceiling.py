"""The rollout engine against a plain Hugging Face loop and the memory-bandwidth ceiling, in one run.

The demo's shapes (issue 34): 4 episodes in lockstep, a 310-token first prompt, then per turn a
64-token response and an 83-token observation, for 20 turns (contexts grow to ~3.2k tokens); one
torch thread; temperature 1; the shipped student. Three ways of generating the same work:

* ``old``: the transformers engine's Hugging Face path (``kv_slots=False``: a ``DynamicCache`` per
  call, prefixes copied out and back in through ``PrefixKVStore``) with ``torch.multinomial``
  sampling, i.e. the engine as it was before the KV slots;
* ``new``: the engine's KV-slot path (``Qwen3Decoder`` over ``SlotPool``, inverse-CDF sampling);
* ``hf loop``: a plain loop over the model carrying one ``DynamicCache`` across turns, sampling
  with ``torch.multinomial``.

Each turn's time includes prefilling its observations; ``ms/step`` is a turn's time over its 64
steps. The ceiling of one decode step is (weight bytes + the batch's KV bytes at its context) /
this machine's one-thread copy bandwidth (bytes copied per second, measured here beyond the L3
cache); the read bandwidth is printed too, as a stricter bound. The machine is shared: compare
the columns of one run, and run it twice for the spread.

    PYTHONPATH=$PWD python bench/decode_ceiling.py [--model student-novel-cut3] [--turns 20] [--repeats 2]
"""

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from services.models.loading import load_causal_lm
from services.rollout_worker.engines import transformers_engine
from services.rollout_worker.engines.base import GenerationParams
from services.rollout_worker.engines.transformers_engine import TransformersEngine

EPISODES, FIRST, RESPONSE, OBSERVATION = 4, 310, 64, 83
Play = Callable[[int], Iterator[float]]  # seed -> the seconds of each turn, as it is played


def multinomial_sample(logits_B_V, temperature, generator):  # type: ignore[no-untyped-def]
    """The sampler the engine used before the KV slots (``torch.multinomial``)."""
    logprobs_B_V = torch.log_softmax(logits_B_V.float() / temperature, dim=-1)
    ids_B = torch.multinomial(logprobs_B_V.exp(), num_samples=1, generator=generator).squeeze(-1)
    return ids_B, logprobs_B_V.gather(-1, ids_B[:, None]).squeeze(-1)


def observations(seed: int, turns: int, vocab: int) -> list[list[list[int]]]:
    rng = random.Random(seed)
    first = [rng.randrange(300, vocab) for _ in range(FIRST)]
    return [
        [first] + [[rng.randrange(300, vocab) for _ in range(OBSERVATION)] for _ in range(turns)]
    ] * EPISODES


def engine_play(engine: TransformersEngine, turns: int) -> Play:
    def play(seed: int) -> Iterator[float]:
        obs = observations(seed, turns, engine.model.config.vocab_size)
        conversations = [list(o[0]) for o in obs]
        for turn in range(turns):
            params = GenerationParams(max_new_tokens=RESPONSE, temperature=1.0, seed=seed * 1000 + turn)
            start = time.perf_counter()
            gens = engine.generate(conversations, params)
            yield time.perf_counter() - start
            for conversation, gen, o in zip(conversations, gens, obs, strict=True):
                conversation.extend(gen.token_ids + o[turn + 1])

    return play


def hf_loop_play(model, turns: int) -> Play:  # type: ignore[no-untyped-def]
    """Lockstep rows of equal length: no padding or mask; one cache for the whole episode."""
    from transformers import DynamicCache

    def play(seed: int) -> Iterator[float]:
        obs = observations(seed, turns, model.config.vocab_size)
        generator = torch.Generator().manual_seed(seed)
        cache, fed, pending = DynamicCache(config=model.config), 0, torch.tensor([o[0] for o in obs])
        for turn in range(turns):
            start = time.perf_counter()
            with torch.inference_mode():
                for _ in range(RESPONSE):
                    positions = torch.arange(fed, fed + pending.shape[1])[None].expand(EPISODES, -1)
                    logits = model(input_ids=pending, position_ids=positions, past_key_values=cache).logits
                    fed += pending.shape[1]
                    probs = torch.softmax(logits[:, -1].float(), dim=-1)
                    pending = torch.multinomial(probs, 1, generator=generator)
            yield time.perf_counter() - start
            pending = torch.cat([pending, torch.tensor([o[turn + 1] for o in obs])], dim=1)

    return play


def bandwidths() -> tuple[float, float]:
    """(copy, read) bytes per second of one thread over 256 MB buffers (beyond the L3 cache), best of 2."""
    src, dst = torch.ones(64 << 20), torch.empty(64 << 20)
    copy, read = [], []
    for _ in range(2):
        start = time.perf_counter()
        dst.copy_(src)
        copy.append(time.perf_counter() - start)
        start = time.perf_counter()
        src.sum()
        read.append(time.perf_counter() - start)
    nbytes = src.numel() * src.element_size()
    return nbytes / min(copy), nbytes / min(read)


class StepClock:
    """Times an engine's decode steps alone (prefill and sampling excluded), per turn."""

    def __init__(self, engine: TransformersEngine) -> None:
        decoder = engine._decoder
        assert decoder is not None
        self.seconds = 0.0
        step = decoder.decode

        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        decoder.decode = timed  # type: ignore[method-assign]

    def lap(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def step_bytes(model, contexts: list[int]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(weight bytes, KV bytes) one decode step reads: every weight but the embedding rows (a tied
    LM head is read once, as the head), and every row's keys and values over its context."""
    config = model.config
    embed = model.get_input_embeddings().weight
    weights = sum(p.numel() * p.element_size() for p in model.parameters() if p is not embed)
    if config.tie_word_embeddings:
        weights += embed.numel() * embed.element_size()
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * embed.element_size()
    return weights, per_token * sum(contexts)


def with_sampler(turns: Iterator[float], sampler: Callable, restore: Callable) -> Iterator[float]:  # type: ignore[type-arg]
    """Each turn of ``turns`` runs with the engine module's ``sample_tokens`` swapped for ``sampler``."""
    while True:
        transformers_engine.sample_tokens = sampler
        try:
            seconds = next(turns, None)
        finally:
            transformers_engine.sample_tokens = restore
        if seconds is None:
            return
        yield seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="student-novel-cut3")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_causal_lm(args.model)
    never = [0]  # the pad id: no stop, so every response is 64 tokens as in the shapes above
    old = TransformersEngine(model, never, 0, prefix_cache_bytes=256 << 20, kv_slots=False)
    new = TransformersEngine(model, never, 0, prefix_cache_bytes=256 << 20)
    assert new.unsupported is None, new.unsupported
    plays: dict[str, Play] = {
        "old": engine_play(old, args.turns),
        "new": engine_play(new, args.turns),
        "hf loop": hf_loop_play(model, args.turns),
    }
    clock = StepClock(new)
    runs: dict[str, list[list[float]]] = {name: [] for name in [*plays, "new steps"]}
    measured: list[tuple[float, float]] = []
    for repeat in range(-1, args.repeats):  # -1: a warm-up (allocations, first calls), not counted
        # Interleaved turn by turn, so that load from other processes on this machine hits all alike;
        # the bandwidth is measured between turns too: it moves with that load.
        turns = {name: play(repeat) for name, play in plays.items()}
        turns["old"] = with_sampler(turns["old"], multinomial_sample, transformers_engine.sample_tokens)
        played: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.turns):
            clock.lap()
            for name, turn in turns.items():
                played[name].append(next(turn))
            played["new steps"].append(clock.lap())
            measured.append(bandwidths())
        if repeat >= 0:
            for name in runs:
                runs[name].append(played[name])
    copy_bw, read_bw = (statistics.median(m[i] for m in measured) for i in (0, 1))
    report(args.model, args.turns, model, runs, copy_bw, read_bw)


def report(
    name: str, turns: int, model, runs: dict[str, list[list[float]]], copy_bw: float, read_bw: float
) -> None:  # type: ignore[no-untyped-def]
    contexts = [FIRST + t * (RESPONSE + OBSERVATION) + RESPONSE // 2 for t in range(turns)]  # mid-turn
    ceilings = [sum(step_bytes(model, [length] * EPISODES)) / copy_bw for length in contexts]
    weights, _ = step_bytes(model, [0])
    engines = ["old", "new", "hf loop"]
    print(
        f"model {name}: {EPISODES} episodes x {turns} turns, first prompt {FIRST}, then {RESPONSE} + {OBSERVATION}"
    )
    print(f"tokens a turn; 1 torch thread; weights read per decode step {weights / 1e6:.1f} MB")
    print(
        f"one-thread bandwidth (median over the run): copy {copy_bw / 1e9:.1f} GB/s, read {read_bw / 1e9:.1f} GB/s"
    )
    print("\nms per decode step, fastest of the repeats: a turn's time / 64 (its prefill included), and")
    print(
        "'steps': the new engine's decode steps alone, against the ceiling (weights + KV bytes / copy bandwidth)"
    )
    print(
        f"{'turn':>4} {'L':>5} | " + "".join(f"{n:>9}" for n in engines) + " |   steps  ceiling  of ceiling"
    )
    fastest = {n: [min(r[t] for r in rs) / RESPONSE for t in range(turns)] for n, rs in runs.items()}
    for t in sorted({0, turns // 4, turns // 2, 3 * turns // 4, turns - 1}):
        row = "".join(f"{fastest[n][t] * 1e3:9.2f}" for n in engines)
        step = fastest["new steps"][t]
        print(
            f"{t + 1:4d} {contexts[t]:5d} | {row} | {step * 1e3:7.2f} {ceilings[t] * 1e3:8.2f}  {ceilings[t] / step:10.0%}"
        )
    steps, tokens = RESPONSE * turns, EPISODES * RESPONSE * turns
    print("\nwhole run, all in (prefill and sampling included), per repeat; ratios within each repeat:")
    for i in range(len(runs["new"])):
        total = {n: sum(runs[n][i]) for n in engines}
        cells = "  ".join(
            f"{n} {total[n] / steps * 1e3:5.2f} ms/step {tokens / total[n]:4.0f} tok/s" for n in engines
        )
        print(
            f"  {i + 1}: {cells}  | new/old {total['old'] / total['new']:.2f}x, new/hf loop {total['hf loop'] / total['new']:.2f}x"
        )
    best = {n: sum(f) * RESPONSE for n, f in fastest.items()}
    print(
        f"  fastest turns: new {tokens / best['new']:.0f} tok/s, new/old {best['old'] / best['new']:.2f}x, "
        f"new/hf loop {best['hf loop'] / best['new']:.2f}x"
    )
    ceiling_s = sum(ceilings) * RESPONSE
    print(
        f"ceiling {ceiling_s / steps * 1e3:.2f} ms/step at the copy bandwidth; the new engine's decode steps "
        f"{best['new steps'] / steps * 1e3:.2f} ms: {ceiling_s / best['new steps']:.0%} of it "
        f"({ceiling_s * copy_bw / read_bw / best['new steps']:.0%} of the read-bandwidth one); all in "
        f"{best['new'] / steps * 1e3:.2f} ms: {ceiling_s / best['new']:.0%}"
    )


if __name__ == "__main__":
    main()
