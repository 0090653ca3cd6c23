"""Learner memory: the full-logits loss against the chunked, fused LM head, side by side.

On a Qwen3-0.6B-shaped model with random weights (``bench/qwen3_workload.py``; ``--layers`` shrinks
it), one sequence of ``--tokens`` tokens of which about half are supervised (responses of
``--turn`` tokens alternating with observations of the same length, as in a multi-turn episode),
teacher top-K from a random distribution. Each path runs one forward + backward in a fresh
subprocess of its own, so that its peak resident memory (``getrusage``'s ``ru_maxrss``; torch's
CPU allocations are ordinary heap or mmap memory, so RSS sees them) is its own. Printed per path:
the process's peak RSS, RSS with the model and its gradient buffers already allocated (before the
step), their difference (what the step itself needed), and the step's wall time; then the ratios.

    nice -n 19 python bench/learner_memory.py [--layers 28] [--tokens 4096] [--chunk 1024]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from qwen3_workload import LAYERS, episode_batch, random_qwen3_0_6b  # noqa: E402

from services.learner.objective import full_logits_loss, micro_batch_loss  # noqa: E402

PATHS = ("full-logits", "chunked", "chunked-no-recompute")


def rss_mib() -> float:
    """Resident memory now, from /proc (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def run_path(args: argparse.Namespace) -> dict[str, float]:
    """One forward + backward of ``args.path`` in this process; its memory and time."""
    torch.set_num_threads(args.threads)
    if args.max_gib:  # a guard on a shared machine: over it an allocation fails, no OOM killer
        limit = int(args.max_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    model = random_qwen3_0_6b(args.layers, seed=0)
    model.train()
    mb = episode_batch(args.tokens, args.turn, model.config.vocab_size, args.k, seed=1)
    for p in model.parameters():  # the gradient buffers exist in any training step: count them before
        p.grad = torch.zeros_like(p)
    before = rss_mib()
    t0 = time.perf_counter()
    match args.path:
        case "full-logits":
            loss, _ = full_logits_loss(model, mb, "tail", (0.9, 9.0))
        case "chunked":
            loss, _ = micro_batch_loss(model, mb, "tail", (0.9, 9.0), chunk_tokens=args.chunk)
        case "chunked-no-recompute":
            loss, _ = micro_batch_loss(
                model, mb, "tail", (0.9, 9.0), chunk_tokens=args.chunk, recompute=False
            )
        case _:
            raise ValueError(f"unknown path {args.path!r}")
    loss.backward()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "peak_mib": peak,
        "before_mib": before,
        "step_mib": peak - before,
        "seconds": seconds,
        "loss": loss.item(),
        "supervised": mb.row_N.numel(),
    }


def spawn(path: str, args: argparse.Namespace) -> dict[str, float] | str:
    """The path's measurements, or why it did not finish (e.g. out of memory)."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k not in ("path", "paths")]
    out = subprocess.run([sys.executable, __file__, f"--path={path}", *flags], capture_output=True, text=True)
    if out.returncode < 0:
        return f"killed by signal {-out.returncode} (SIGKILL: most likely the kernel's OOM killer)"
    if out.returncode != 0:
        last = out.stderr.strip().splitlines()[-1:] or ["no message"]
        return f"failed (exit {out.returncode}): {last[0][:300]}"
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--turn", type=int, default=128, help="tokens per response and per observation")
    parser.add_argument("--k", type=int, default=50, help="teacher top-K")
    parser.add_argument("--chunk", type=int, default=1024, help="[learner] logits_chunk_tokens")
    parser.add_argument("--max-gib", type=float, default=0.0, help="address-space limit per path (0: none)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument(
        "--paths", default=",".join(PATHS[:2]), help=f"comma-separated, of {', '.join(PATHS)}"
    )
    parser.add_argument("--path", help=argparse.SUPPRESS)  # set in the subprocess that runs one path
    args = parser.parse_args()
    if args.path:
        print(json.dumps(run_path(args)))
        return
    print(
        f"Qwen3-0.6B shape, {args.layers} layers, {args.tokens} tokens, top-{args.k}, chunk {args.chunk}, "
        f"{args.threads} threads, float32"
    )
    results = {}
    for path in args.paths.split(","):
        r = spawn(path, args)
        if isinstance(r, str):
            limit = f" under --max-gib {args.max_gib}" if args.max_gib else ""
            print(f"{path:>21}: did not finish{limit}: {r}")
            continue
        results[path] = r
        print(
            f"{path:>21}: peak RSS {r['peak_mib']:8.0f} MiB, before the step {r['before_mib']:7.0f} MiB, "
            f"step {r['step_mib']:7.0f} MiB, {r['seconds']:7.1f} s ({r['supervised']:.0f} supervised, "
            f"loss {r['loss']:.6f})"
        )
    if "full-logits" in results:
        old = results["full-logits"]
        for path, r in results.items():
            if path != "full-logits":
                print(
                    f"{path} / full-logits: step memory {r['step_mib'] / old['step_mib']:.3f}, "
                    f"peak RSS {r['peak_mib'] / old['peak_mib']:.3f}, time {r['seconds'] / old['seconds']:.3f}"
                )


if __name__ == "__main__":
    main()
