"""The rollout engine against a plain Hugging Face loop and the memory-bandwidth ceiling, in one run.

The demo's shapes (issue 34): 4 episodes in lockstep, a 310-token first prompt, then per turn a
64-token response and an 83-token observation, for 20 turns (contexts grow to ~3.2k tokens); one
torch thread; temperature 1; the shipped student. Three ways of generating the same work:

* ``old``: the transformers engine's Hugging Face path (``kv_slots=False``: a ``DynamicCache`` per
  call, prefixes copied out and back in through ``PrefixKVStore``) with ``torch.multinomial``
  sampling, i.e. the engine as it was before the KV slots;
* ``slots``: the engine's KV-slot path (``Qwen3Decoder`` over ``SlotPool``, inverse-CDF sampling)
  on torch's ops (``native_kernels=False``), as it was before the compiled decode kernels;
* ``new``: the same with the compiled decode kernels (``native_kernels.py``), the engine's default;
* ``hf loop``: a plain loop over the model carrying one ``DynamicCache`` across turns, sampling
  with ``torch.multinomial``.

A decode step is timed from one sampled batch to the next (the forward of one token per row, the
sampling and the loop's bookkeeping); per turn the median of its 63 steps is kept, and of the
repeats the least disturbed (other processes' load on this shared machine comes in bursts that can
outlast a turn); the four are interleaved turn by turn, and each repeat's own ratios are printed.
A turn's whole time (its prefill included) gives the all-in tokens/s. The ceiling of one decode
step is (weight bytes + the batch's KV bytes at its context) / this machine's one-thread read
bandwidth (bytes summed per second over 256 MB, measured between turns: it moves with the load): a
decode step only reads. The copy bandwidth (about half of it), which this bench divided by before
the compiled kernels went past it, is printed too. Run it twice for the spread.

    PYTHONPATH=$PWD python bench/decode_ceiling.py [--model student-novel-cut3] [--turns 20] [--repeats 2]
"""

import argparse
import itertools
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
ENGINES = ("old", "slots", "new", "hf loop")
Play = Callable[[int], Iterator[float]]  # seed -> the seconds of each turn, as it is played


class Ticks:
    """When each batch of tokens was sampled, per turn: the intervals are the decode steps."""

    def __init__(self) -> None:
        self.now: list[float] = []
        self.turns: list[list[float]] = []

    def tick(self) -> None:
        self.now.append(time.perf_counter())

    def end_turn(self) -> None:
        self.turns.append(self.now)
        self.now = []

    def step_seconds(self, turn: int) -> float:
        """The median decode step of ``turn``."""
        stamps = self.turns[turn]
        return statistics.median(b - a for a, b in itertools.pairwise(stamps))


def ticking(sampler: Callable, ticks: Ticks) -> Callable:  # type: ignore[type-arg]
    def sample(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = sampler(*args, **kwargs)
        ticks.tick()
        return out

    return sample


class TickingKernels:
    """The engine's compiled kernels, its sampler ticking (the engine samples through ``kernels.sample``
    when it has kernels, not through the module's ``sample_tokens``)."""

    def __init__(self, kernels, ticks: Ticks) -> None:  # type: ignore[no-untyped-def]
        self.kernels, self.sample = kernels, ticking(kernels.sample, ticks)


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


def hf_loop_play(model, turns: int, ticks: Ticks) -> Play:  # type: ignore[no-untyped-def]
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
                    ticks.tick()
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="student-novel-cut3")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_causal_lm(args.model)
    never = [0]  # the pad id: no stop, so every response is 64 tokens as in the shapes above
    old = TransformersEngine(model, never, 0, prefix_cache_bytes=256 << 20, kv_slots=False)
    slots = TransformersEngine(model, never, 0, prefix_cache_bytes=256 << 20, native_kernels=False)
    new = TransformersEngine(model, never, 0, prefix_cache_bytes=256 << 20)
    assert new.unsupported is None and new.kernels is not None, (new.unsupported, "no decode kernels")
    kernels = new.kernels
    inverse_cdf = transformers_engine.sample_tokens
    steps: dict[str, list[list[float]]] = {name: [] for name in ENGINES}
    totals: dict[str, list[float]] = {name: [] for name in ENGINES}
    measured: list[tuple[float, float]] = []
    for repeat in range(-1, args.repeats):  # -1: a warm-up (allocations, first calls), not counted
        ticks = {name: Ticks() for name in ENGINES}
        # Interleaved turn by turn, so that load from other processes on this machine hits all alike;
        # each engine's turns run with its own sampler (the module's name is swapped).
        turns = {
            "old": with_sampler(
                engine_play(old, args.turns)(repeat), ticking(multinomial_sample, ticks["old"])
            ),
            "slots": with_sampler(
                engine_play(slots, args.turns)(repeat), ticking(inverse_cdf, ticks["slots"])
            ),
            "new": engine_play(new, args.turns)(repeat),
            "hf loop": hf_loop_play(model, args.turns, ticks["hf loop"])(repeat),
        }
        new.kernels = TickingKernels(kernels, ticks["new"])  # type: ignore[assignment]
        seconds = dict.fromkeys(ENGINES, 0.0)
        for _ in range(args.turns if repeat >= 0 else 2):
            for name, turn in turns.items():
                seconds[name] += next(turn)
                ticks[name].end_turn()
            measured.append(bandwidths())
        transformers_engine.sample_tokens = inverse_cdf
        if repeat >= 0:
            for name in ENGINES:
                steps[name].append([ticks[name].step_seconds(t) for t in range(args.turns)])
                totals[name].append(seconds[name])
    copy_bw, read_bw = (statistics.median(m[i] for m in measured) for i in (0, 1))
    report(args.model, args.turns, model, steps, totals, copy_bw, read_bw)


def with_sampler(turns: Iterator[float], sampler: Callable) -> Iterator[float]:  # type: ignore[type-arg]
    """``turns``, each run with the engine module's ``sample_tokens`` set to ``sampler``."""
    while True:
        transformers_engine.sample_tokens = sampler
        seconds = next(turns, None)
        if seconds is None:
            return
        yield seconds


def report(  # type: ignore[no-untyped-def]
    name: str,
    turns: int,
    model,
    steps: dict[str, list[list[float]]],
    totals: dict[str, list[float]],
    copy_bw: float,
    read_bw: float,
) -> None:
    contexts = [FIRST + t * (RESPONSE + OBSERVATION) + RESPONSE // 2 for t in range(turns)]  # mid-turn
    ceilings = [sum(step_bytes(model, [length] * EPISODES)) / read_bw for length in contexts]
    weights, _ = step_bytes(model, [0])
    print(
        f"model {name}: {EPISODES} episodes x {turns} turns, first prompt {FIRST}, then {RESPONSE} + {OBSERVATION}"
    )
    print(f"tokens a turn; 1 torch thread; weights read per decode step {weights / 1e6:.1f} MB")
    print(
        f"one-thread bandwidth (median between turns): copy {copy_bw / 1e9:.1f} GB/s, read {read_bw / 1e9:.1f} GB/s"
    )
    print(
        "\nms per decode step (median step of the turn, the least disturbed of the repeats) and the ceiling"
    )
    print(f"{'turn':>4} {'L':>5} | " + "".join(f"{n:>9}" for n in ENGINES) + " | ceiling (read)  new of it")
    per_turn = {n: [min(r[t] for r in rs) for t in range(turns)] for n, rs in steps.items()}
    for t in sorted({0, turns // 4, turns // 2, 3 * turns // 4, turns - 1}):
        row = "".join(f"{per_turn[n][t] * 1e3:9.2f}" for n in ENGINES)
        print(
            f"{t + 1:4d} {contexts[t]:5d} | {row} | {ceilings[t] * 1e3:14.2f}  {ceilings[t] / per_turn['new'][t]:8.0%}"
        )
    mean = {n: statistics.fmean(per_turn[n]) for n in ENGINES}
    print("\nover the run (mean of the turns' step times):")
    print(
        "  " + "  ".join(f"{n} {mean[n] * 1e3:.2f} ms/step = {EPISODES / mean[n]:.0f} tok/s" for n in ENGINES)
    )
    print(
        f"  new/old {mean['old'] / mean['new']:.2f}x, new/hf loop {mean['hf loop'] / mean['new']:.2f}x, "
        f"new/slots {mean['slots'] / mean['new']:.2f}x; per repeat (new/old, new/hf loop, new/slots): "
        + ", ".join(
            " / ".join(f"{statistics.fmean(other) / statistics.fmean(w):.2f}x" for other in (o, h, s))
            for o, w, h, s in zip(steps["old"], steps["new"], steps["hf loop"], steps["slots"], strict=True)
        )
    )
    ceiling = statistics.fmean(ceilings)
    print(
        f"  ceiling {ceiling * 1e3:.2f} ms/step at the read bandwidth: new at {ceiling / mean['new']:.0%} of it, "
        f"slots at {ceiling / mean['slots']:.0%} (at the copy bandwidth, {ceiling * read_bw / copy_bw * 1e3:.2f} "
        "ms/step, the bound this bench used before the kernels: new "
        f"{ceiling * read_bw / copy_bw / mean['new']:.0%})"
    )
    tokens = EPISODES * RESPONSE * turns
    print("all in (whole turns: prefill, sampling, loop), tokens/s per repeat:")
    for n in ENGINES:
        print(f"  {n:8s} " + "  ".join(f"{tokens / s:5.0f}" for s in totals[n]))


if __name__ == "__main__":
    main()
