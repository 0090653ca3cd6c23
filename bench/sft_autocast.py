"""Is bfloat16 autocast faster than float32 for SFT on this CPU? (`[sft] autocast`)

``auto`` (the default) takes bfloat16 only where the hardware computes it
(``services/teacher_training/precision.py``). This measures, side by side in one run, interleaved,
the median of ``--repeats`` calls after one warm-up call of each:

* one linear layer of the teacher's MLP shape (T x 256 by 256 x 768), forward and backward;
* one SFT pass of the loss the trainer runs (``response_loss``: the decoder under autocast or not,
  the lm head and cross-entropy in float32) over a T-token sequence of the shipped ``--model``,
  forward and backward, every position a response token.

It prints the CPU's bfloat16 support, each variant's milliseconds, and float32's speed relative to
bfloat16 (above 1: float32 is faster).

    PYTHONPATH=$PWD python bench/sft_autocast.py [--model teacher-novel] [--tokens 4096] [--repeats 3]
"""

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from services.models.loading import load_causal_lm
from services.teacher_training.precision import native_bfloat16
from services.teacher_training.trainer import EpisodeTensors, response_loss


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="teacher-novel", help="zoo name or path of the model to pass")
    p.add_argument("--tokens", type=int, default=4096, help="sequence length T")
    p.add_argument("--repeats", type=int, default=3, help="timed calls of each variant (median)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return p.parse_args()


def timed(fn: Callable[[], None]) -> float:
    """Milliseconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def linear_pass(x: torch.Tensor, layer: torch.nn.Linear, bf16: bool) -> Callable[[], None]:
    def run() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = layer(x)
        out.float().sum().backward()

    return run


def sft_pass(model: torch.nn.Module, batch: EpisodeTensors, bf16: bool) -> Callable[[], None]:
    def run() -> None:
        loss, _, _ = response_loss(model, batch, bf16=bf16)  # type: ignore[arg-type]
        (loss / batch.weight).backward()
        model.zero_grad(set_to_none=True)

    return run


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; native bfloat16 here: "
        f"{native_bfloat16(cpu)} (AVX512-BF16 {torch.cpu._is_avx512_bf16_supported()}, "
        f"AMX {torch.cpu._is_amx_tile_supported()})"
    )
    x = torch.randn(args.tokens, 256, requires_grad=True)
    layer = torch.nn.Linear(256, 768)
    model = load_causal_lm(args.model).train()
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (args.tokens,))
    batch = EpisodeTensors(
        input_ids_1_T=ids[None, :],
        predict_at_N=torch.arange(args.tokens - 1),
        targets_N=ids[1:],
        context_at_M=torch.zeros(0, dtype=torch.long),
        context_targets_M=torch.zeros(0, dtype=torch.long),
        weights_N=torch.ones(args.tokens - 1),
        weight=float(args.tokens - 1),
    )
    for name, make in (
        (f"linear {args.tokens}x256 @ 256x768, fwd+bwd", lambda bf16: linear_pass(x, layer, bf16)),
        (
            f"SFT pass of {args.model}, {args.tokens} tokens, fwd+bwd",
            lambda bf16: sft_pass(model, batch, bf16),
        ),
    ):
        variants = make(False), make(True)
        for run in variants:
            run()  # warm-up
        f32, b16 = [], []
        for _ in range(args.repeats):  # interleaved: one call of each in turn
            f32.append(timed(variants[0]))
            b16.append(timed(variants[1]))
        fm, bm = statistics.median(f32), statistics.median(b16)
        print(f"{name}: float32 {fm:.0f} ms, bfloat16 {bm:.0f} ms, float32 {bm / fm:.2f}x as fast")


if __name__ == "__main__":
    main()
