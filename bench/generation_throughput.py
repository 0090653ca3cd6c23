"""Generation throughput of the transformers engine, measured side by side in one run.

1. One batched call: the engine vs one bare ``model.generate`` call on the same prompts. Both
   sample at temperature 1 (no top-k/top-p) with a KV cache; ``model.generate`` also returns its
   processed scores (what it would take log-probs from). Tokens count up to and including a stop.
2. Multi-turn episodes: each turn's prompt is the previous prompt + response + an observation;
   the engine with its cross-turn prefix cache vs the same engine without it.

    PYTHONPATH=$PWD python bench/generation_throughput.py [--model teacher] [--batch 16] [--new 64]
"""

import argparse
import random
import time

import torch

from services.models.build import build_zoo
from services.rollout_worker.engines.base import GenerationParams
from services.rollout_worker.engines.transformers_engine import TransformersEngine


def _prompts(batch: int, vocab: int, low: int, high: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(low, high))] for _ in range(batch)]


def _engine_tokens(engine: TransformersEngine, prompts: list[list[int]], new: int) -> int:
    gens = engine.generate(prompts, GenerationParams(max_new_tokens=new, temperature=1.0, seed=1))
    return sum(len(g.token_ids) for g in gens)


def _generate_tokens(engine: TransformersEngine, prompts: list[list[int]], new: int, pad: int) -> int:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    torch.manual_seed(1)
    with torch.inference_mode():
        out = engine.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new,
            eos_token_id=list(engine.stop_token_ids),
            pad_token_id=pad,
            output_scores=True,
            return_dict_in_generate=True,
        )
    generated = out.sequences[:, width:].tolist()
    stop = set(engine.stop_token_ids)
    total = 0
    for row in generated:
        n = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
        total += n
    return total


def _episodes_rate(engine: TransformersEngine, prompts: list[list[int]], turns: int, new: int) -> float:
    """Generated tokens per second over ``turns`` turns of every episode (observations: 40 random ids)."""
    rng = random.Random(1)
    vocab = engine.model.config.vocab_size
    conversations = [list(p) for p in prompts]
    generated = 0
    start = time.perf_counter()
    for turn in range(turns):
        params = GenerationParams(max_new_tokens=new, temperature=1.0, seed=turn)
        gens = engine.generate(conversations, params)
        for conversation, gen in zip(conversations, gens, strict=True):
            conversation.extend(gen.token_ids)
            conversation.extend(rng.randrange(3, vocab) for _ in range(40))
            generated += len(gen.token_ids)
    return generated / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="teacher", choices=["teacher", "student"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new", type=int, default=64, help="max new tokens per request")
    parser.add_argument("--prompt-min", type=int, default=200)
    parser.add_argument("--prompt-max", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--turns", type=int, default=6, help="turns per episode in the multi-turn part")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    build_zoo()
    engine = TransformersEngine.from_pretrained(args.model)
    pad = engine.model.config.pad_token_id
    prompts = _prompts(args.batch, engine.model.config.vocab_size, args.prompt_min, args.prompt_max, seed=0)
    _engine_tokens(engine, prompts[:2], 4)  # warm-up
    _generate_tokens(engine, prompts[:2], 4, pad)
    rates: dict[str, list[float]] = {"engine": [], "generate": []}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        start = time.perf_counter()
        n = _engine_tokens(engine, prompts, args.new)
        rates["engine"].append(n / (time.perf_counter() - start))
        start = time.perf_counter()
        n = _generate_tokens(engine, prompts, args.new, pad)
        rates["generate"].append(n / (time.perf_counter() - start))
    best = {k: max(v) for k, v in rates.items()}
    print(
        f"model={args.model} batch={args.batch} max_new={args.new} "
        f"prompt_len=[{args.prompt_min},{args.prompt_max}] threads={args.threads} (best of {args.repeats})"
    )
    print(f"engine           {best['engine']:9.1f} tokens/s")
    print(f"model.generate   {best['generate']:9.1f} tokens/s")
    print(f"ratio engine/generate = {best['engine'] / best['generate']:.2f}")

    short = _prompts(args.batch, engine.model.config.vocab_size, 150, 300, seed=2)
    turn_rates: dict[str, list[float]] = {"cache": [], "no cache": []}
    prefilled = 0
    for _ in range(args.repeats):
        cached = TransformersEngine(engine.model, engine.stop_token_ids, pad, prefix_cache_bytes=512 << 20)
        turn_rates["cache"].append(_episodes_rate(cached, short, args.turns, args.new))
        turn_rates["no cache"].append(_episodes_rate(engine, short, args.turns, args.new))
        prefilled = cached.prefilled_tokens
    with_cache, without = max(turn_rates["cache"]), max(turn_rates["no cache"])
    print(f"multi-turn: {args.batch} episodes x {args.turns} turns, prompts [150,300], observations 40")
    print(f"engine, prefix cache     {with_cache:9.1f} tokens/s  ({prefilled} prompt tokens prefilled)")
    print(f"engine, no prefix cache  {without:9.1f} tokens/s")
    print(f"ratio cache/no cache = {with_cache / without:.2f}")


if __name__ == "__main__":
    main()
