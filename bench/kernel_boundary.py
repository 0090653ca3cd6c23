"""What the checked boundary of the compiled decode kernels costs per call, side by side in one run.

For each entry, on the demo's shapes (batch 4, hidden 256, the shipped student's 4 query and 2 key
heads of 64, a context of 1,024, a vocabulary of 8,192) and on a tiny one where the call is all
overhead:

* ``raw``: the ctypes function called with the tensors' addresses, no check at all (what the glue
  did per call before the table, less its few shape checks);
* ``checked``: the function ``native_abi.py`` generates from the table (dtype, device, contiguity,
  sizes, conditions), then the same ctypes call;
* ``wrapper``: ``DecodeKernels``' method as the engine calls it (its shape checks, its output
  allocation, the checked call).

Printed: microseconds per call (the least of 7 rounds of 2,000 calls, interleaved: other load only adds), the checks'
cost (checked - raw), and what that adds to a decode step of the demo's student (5 calls a layer,
4 layers, the head and the sampler: 22 calls) against the step time ``bench/decode_ceiling.py``
measures (pass it with --step-ms; 3.4 ms here), taking the tiny shapes' cost as the checks' cost.

    PYTHONPATH=$PWD python bench/kernel_boundary.py [--step-ms 3.4]
"""

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from services.rollout_worker.engines.native_kernels import Rope, load_kernels, slot_batch

ROUNDS, CALLS = 7, 2000


def per_call_us(function: Callable[[], object]) -> float:
    for _ in range(200):
        function()
    start = time.perf_counter()
    for _ in range(CALLS):
        function()
    return (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--step-ms", type=float, default=3.4, help="a decode step's time (decode_ceiling.py)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    kernels = load_kernels(Path(tempfile.mkdtemp(prefix="kernel-boundary-")))
    lib = kernels._lib
    g = torch.Generator().manual_seed(0)
    cases: dict[str, dict[str, Callable[[], object]]] = {}
    checked_matmul = kernels._entries["skinny_matmul"]
    attention = kernels._entries["decode_attention"]
    for label, (n, inner, out) in {"tiny": (4, 8, 4), "demo": (4, 256, 768)}.items():
        x, w = torch.randn(n, inner, generator=g), torch.randn(out, inner, generator=g)
        norm, y, scratch = torch.randn(inner, generator=g), torch.empty(n, out), torch.empty(n * inner)
        cases[f"matmul+norm {label} [{n},{inner}]x[{out},{inner}]"] = {
            "raw": lambda x=x, w=w, n=n, i=inner, o=out, y=y, nm=norm, s=scratch: lib.skinny_matmul(
                x.data_ptr(), w.data_ptr(), n, i, o, y.data_ptr(), nm.data_ptr(), 1e-6, 0, 0, s.data_ptr()
            ),
            "checked": lambda x=x, w=w, n=n, i=inner, o=out, y=y, nm=norm, s=scratch: checked_matmul(
                x, w, n, i, o, y, nm, 1e-6, 0, 0, s
            ),
            "wrapper": lambda x=x, w=w, nm=norm: kernels.matmul(x, w, norm=nm, eps=1e-6),
        }
    heads, kv_heads = 4, 2
    for label, (dim, context) in {"tiny": (8, 4), "demo": (64, 1024)}.items():
        kvs = [torch.randn(4, 2, kv_heads, 2048, dim, generator=g) for _ in range(4)]
        batch = slot_batch(kvs, [context] * 4, heads // kv_heads)
        rope = Rope(torch.randn(heads + kv_heads, dim), torch.randn(2048, dim), torch.randn(2048, dim), 1e-6)
        qkv = torch.randn(4, (heads + 2 * kv_heads) * dim, generator=g)
        out_buf = torch.empty(4, heads * dim)

        def raw_attention(qkv=qkv, b=batch, r=rope, o=out_buf, d=dim) -> object:
            return lib.decode_attention(
                qkv.data_ptr(),
                4,
                qkv.shape[1],
                b.slots.data_ptr(),
                b.capacities.data_ptr(),
                b.positions.data_ptr(),
                1,
                heads,
                kv_heads,
                d,
                d**-0.5,
                r.qk_norm.data_ptr(),
                r.cos.data_ptr(),
                r.sin.data_ptr(),
                2048,
                1e-6,
                b.work.data_ptr(),
                b.work.numel(),
                o.data_ptr(),
            )

        def checked_attention(qkv=qkv, b=batch, r=rope, o=out_buf, d=dim) -> object:
            return attention(
                qkv,
                4,
                qkv.shape[1],
                b.slots,
                b.capacities,
                b.positions,
                1,
                heads,
                kv_heads,
                d,
                d**-0.5,
                r.qk_norm,
                r.cos,
                r.sin,
                2048,
                1e-6,
                b.work,
                b.work.numel(),
                o,
            )

        cases[f"decode_attention {label} (dim {dim}, context {context})"] = {
            "raw": raw_attention,
            "checked": checked_attention,
            "wrapper": lambda qkv=qkv, b=batch, r=rope, d=dim: kernels.decode_attention(
                qkv, b, 1, heads, kv_heads, d, r
            ),
        }
    logits, uniform = torch.randn(4, 8192, generator=g), torch.rand(4, 1, generator=g)
    ids, lps, scratch_v = torch.empty(4, dtype=torch.int64), torch.empty(4), torch.empty(8192)
    sample = kernels._entries["sample_rows"]
    cases["sample_rows demo (vocab 8192)"] = {
        "raw": lambda: lib.sample_rows(
            logits.data_ptr(),
            4,
            8192,
            1.0,
            uniform.data_ptr(),
            ids.data_ptr(),
            lps.data_ptr(),
            scratch_v.data_ptr(),
        ),
        "checked": lambda: sample(logits, 4, 8192, 1.0, uniform, ids, lps, scratch_v),
        "wrapper": lambda: kernels.tokens_at(logits, 1.0, uniform),
    }
    print(f"{'entry':48} {'raw':>8} {'checked':>8} {'wrapper':>8}   checks (us per call)")
    overheads = {}
    for name, arms in cases.items():
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        for _ in range(ROUNDS):
            for arm, function in arms.items():
                times[arm].append(per_call_us(function))
        median = {arm: min(values) for arm, values in times.items()}
        overheads[name.split()[0]] = overheads.get(name.split()[0], median["checked"] - median["raw"])
        print(
            f"{name:48} {median['raw']:8.2f} {median['checked']:8.2f} {median['wrapper']:8.2f}"
            f"   {median['checked'] - median['raw']:+.2f}"
        )
    per_step = 17 * overheads["matmul+norm"] + 4 * overheads["decode_attention"] + overheads["sample_rows"]
    print(
        f"\na decode step of the demo's student makes 17 matmuls, 4 attention calls and a draw: "
        f"{per_step:.0f} us of checks (the tiny shapes' cost), {per_step / (args.step_ms * 1e3):.1%} of a "
        f"{args.step_ms} ms step"
    )


if __name__ == "__main__":
    main()
