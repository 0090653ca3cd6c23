"""Would bfloat16 keys and values make a decode step cheaper on this CPU? (issue 34, item 4)

A decode step of the KV-slot engine reads every row's keys and values once per layer: at the
demo's late contexts they are most of the bytes the step moves (``bench/decode_ceiling.py``), so
halving them would lower the bandwidth ceiling itself, if attention over bfloat16 runs at the
bandwidth that float32 does. This measures one row's decode attention at the shipped student's
shapes (its kv heads, query heads per kv head and head dim), one torch thread, side by side in one
run, interleaved, the median of many calls:

* ``fp32 sdpa``: what the engine runs (``scaled_dot_product_attention``, one query, no mask);
* ``bf16 sdpa``: the same call on bfloat16 queries, keys and values, the output back to float32;
* ``bf16 bmm``: scores and the weighted sum as two bfloat16 batched matmuls, softmax in float32,
  over keys and values copied out contiguous first (the most favourable layout: over a slot's
  prefix view the matmuls copy it on every call and run 3-4x slower still).

Each line prints microseconds per call, the read bandwidth the float32 call reaches over its keys
and values, and each bfloat16 variant's speed relative to float32 (above 1: faster).

    PYTHONPATH=$PWD python bench/kv_dtype_attention.py [--model student-novel-cut3] [--calls 400]
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from services.models.registry import resolve_model_dir

CONTEXTS = (342, 1812, 3135)  # turns 1, 11 and 20 of bench/decode_ceiling.py's episodes


def median_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


def variants(kv_heads: int, group: int, dim: int, length: int) -> dict[str, Callable[[], object]]:
    """The three ways of attending one query row over ``length`` cached positions; the cache sits in
    a larger buffer, as a slot's valid prefix does."""
    generator = torch.Generator().manual_seed(length)
    q = torch.randn(1, kv_heads, group, dim, generator=generator)
    cache = torch.randn(2, 1, kv_heads, length + 256, dim, generator=generator)
    k32, v32 = cache[0, :, :, :length], cache[1, :, :, :length]
    cache16 = cache.to(torch.bfloat16)
    k16, v16 = cache16[0, :, :, :length], cache16[1, :, :, :length]
    scale = dim**-0.5

    k16_c, v16_c, q3 = k16[0].contiguous(), v16[0].contiguous(), q[0]

    def bf16_bmm() -> torch.Tensor:
        scores = torch.bmm(q3.to(torch.bfloat16), k16_c.transpose(1, 2)).float() * scale
        return torch.bmm(torch.softmax(scores, dim=-1).to(torch.bfloat16), v16_c).float()

    return {
        "fp32 sdpa": lambda: F.scaled_dot_product_attention(q, k32, v32),
        "bf16 sdpa": lambda: F.scaled_dot_product_attention(q.to(torch.bfloat16), k16, v16).float(),
        "bf16 bmm": bf16_bmm,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="student-novel-cut3")
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = json.loads((resolve_model_dir(args.model) / "config.json").read_text())
    heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    print(f"{args.model}: {kv_heads} kv heads x {heads // kv_heads} queries each, head dim {dim}; one thread")
    print(
        f"{'context':>8} {'fp32 sdpa':>10} {'GB/s':>6} {'bf16 sdpa':>10} {'x fp32':>7} {'bf16 bmm':>10} {'x fp32':>7}"
    )
    for length in CONTEXTS:
        fns = variants(kv_heads, heads // kv_heads, dim, length)
        us = {name: [] for name in fns}
        for _ in range(3):  # interleaved: a burst of load elsewhere hits all three alike
            for name, fn in fns.items():
                us[name].append(median_us(fn, args.calls // 3))
        best = {name: min(values) for name, values in us.items()}
        gbs = 2 * kv_heads * length * dim * 4 / (best["fp32 sdpa"] * 1e-6) / 1e9
        print(
            f"{length:>8} {best['fp32 sdpa']:>8.1f}us {gbs:>6.1f} {best['bf16 sdpa']:>8.1f}us"
            f" {best['fp32 sdpa'] / best['bf16 sdpa']:>7.2f} {best['bf16 bmm']:>8.1f}us"
            f" {best['fp32 sdpa'] / best['bf16 bmm']:>7.2f}"
        )


if __name__ == "__main__":
    main()
