"""Checks that need a GPU, one small function each; prints one line per check.

CUDA part (needs CUDA, PyTorch and Transformers only: no Ray, no vLLM): on a Qwen3-0.6B-shaped
model with random weights (``bench/qwen3_workload.py``), in bfloat16, each prints tokens/s and the
model FLOPs utilisation (MFU) against the card's dense bf16 peak (``PEAK_BF16_TFLOPS``; an unknown
card prints tokens/s only).

* teacher scoring: the transformers teacher engine scores 16 rows of 2,048 tokens, the second
  half of each, top-50.
* rollout generation: the transformers rollout engine samples 128 tokens for each of 32 prompts of
  512 tokens; the rate counts generated tokens, the FLOPs include the prefill.
* learner update: FSDP2 (world size 1, NCCL, initialised in this process), float32 master weights
  with bfloat16 compute (``MixedPrecisionPolicy``), the chunked fused LM head, clip and AdamW, on
  one episode of ``--learner-tokens`` (16,384, half supervised); timed over ``--learner-steps``
  updates after one warm-up. The anchor: prime-rl's trainer reaches 11.9K tokens/s, 11.1% MFU on
  one H100 with Qwen3-0.6B at 16k sequence length.

FLOPs model, with N the parameters of the matmuls below the head and N_head = V x H the head's,
d = heads x head_dim, L layers, T a sequence's length (sum over sequences): a forward costs
2 N per token, 2 N_head per position the head runs at (scored or supervised positions; every
token in generation) and causal attention 2 L d T^2; training is three forwards (6 N, 6 N_head,
6 L d T^2). MFU is printed without attention (the ``6 N`` convention) and with it.

vLLM part (needs CUDA and an importable vLLM, the version the ``gpu`` extra pins): on one
random-weight Qwen3 checkpoint, the vLLM engines against the transformers engines in bfloat16.

1. rollout generate: the vLLM rollout engine decodes greedily; the transformers model, fed the same
   tokens, gives each the same log-prob within bf16 tolerance and ranks it first (up to that
   tolerance). Token agreement with the transformers engine's own greedy decode is printed too.
2. weight reload: another random checkpoint's weights are published to both engines as version 1
   (``load_weights``: for vLLM a file on the node, only its path crossing into its workers); the
   vLLM output changes and check 1 holds again.
3. teacher scoring: the vLLM teacher and the transformers teacher score the same rows: the same
   top-K ids (a swap only between log-probs within tolerance), top-K and token log-probs within
   tolerance.

Where vLLM is not importable the vLLM part says so in one line; without CUDA the script says so in
one line. Exit status: 1 if a check failed, else 0.

Tolerance (``--atol``, nats): the random head makes logits span tens of nats, where bf16 keeps
steps of 1/16 to 1/8; the same model in bf16 against float32 differs by up to 0.37 in a top-5
log-prob on a CPU. 0.5 is a first bound, not yet calibrated on a GPU: each line prints the largest
difference seen.

    python bench/gpu_check.py [--atol 0.5] [--only cuda|vllm]
"""

import argparse
import gc
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

SPEC_FIELDS = {"vocab_size": 512, "hidden_size": 128, "num_layers": 2, "num_heads": 2, "max_context": 512}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.detail}"


# --- pure comparisons (CPU-testable) -------------------------------------------------------------


def logprob_gaps(
    tokens: Sequence[int], logprobs: Sequence[float], reference_L_V: torch.Tensor
) -> tuple[float, float]:
    """(largest |log-prob - reference log-prob|, largest shortfall of the token below the reference
    argmax) over generated ``tokens``; ``reference_L_V`` holds the reference log-softmax rows that
    predicted them."""
    ids = torch.tensor(list(tokens), dtype=torch.long)
    ref = reference_L_V.float().gather(-1, ids[:, None])[:, 0]
    diff = (torch.tensor(list(logprobs)) - ref).abs().max().item()
    shortfall = (reference_L_V.float().max(-1).values - ref).max().item()
    return float(diff), float(shortfall)


def topk_disagreement(
    ids_a: np.ndarray, lps_a: np.ndarray, ids_b: np.ndarray, lps_b: np.ndarray, atol: float
) -> tuple[int, float]:
    """(positions whose top-K ids differ beyond near-ties, largest |top-K log-prob difference|).

    An id in one top-K but not the other is a near-tie when its log-prob is within ``atol`` of the
    other side's K-th (smallest) log-prob.
    """
    bad = 0
    for row in range(ids_a.shape[0]):
        only_a = set(ids_a[row].tolist()) - set(ids_b[row].tolist())
        only_b = set(ids_b[row].tolist()) - set(ids_a[row].tolist())
        lp_a = dict(zip(ids_a[row].tolist(), lps_a[row].tolist(), strict=True))
        lp_b = dict(zip(ids_b[row].tolist(), lps_b[row].tolist(), strict=True))
        if any(lp_a[i] < lps_b[row].min() - atol for i in only_a) or any(
            lp_b[i] < lps_a[row].min() - atol for i in only_b
        ):
            bad += 1
    return bad, float(np.abs(lps_a - lps_b).max())


# --- environment --------------------------------------------------------------------------------


def import_vllm() -> ModuleType | None:
    try:
        import vllm
    except ImportError as exc:
        print(f"SKIP vLLM checks: vllm is not importable here ({exc}); pip install 'turnopd[gpu]'")
        return None
    return vllm


def random_checkpoint(root: Path, seed: int) -> Path:
    from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, write_random_qwen3

    return write_random_qwen3(root / f"random-{seed}", RandomQwen3Spec(**SPEC_FIELDS, seed=seed))


def shut_down(llm: Any) -> None:
    """Stop a ``vllm.LLM``'s engine process and free its GPU memory before the next one starts."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    del llm
    gc.collect()
    torch.cuda.empty_cache()


# --- the vLLM checks ----------------------------------------------------------------------------


def reference_rows(model: Any, prompt: Sequence[int], generated: Sequence[int]) -> torch.Tensor:
    """The model's log-softmax rows that predict ``generated`` after ``prompt`` (teacher forcing)."""
    ids = torch.tensor([[*prompt, *generated]], device=model.device)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1).cpu()


def check_generate(
    name: str, vllm_engine: Any, hf_engine: Any, prompts: list[list[int]], atol: float
) -> Check:
    from services.rollout_worker.engines import GenerationParams

    greedy = GenerationParams(max_new_tokens=16, temperature=0.0, seed=0)
    ours, theirs = vllm_engine.generate(prompts, greedy), hf_engine.generate(prompts, greedy)
    worst_diff, worst_shortfall, same, total = 0.0, 0.0, 0, 0
    for prompt, gen, ref_gen in zip(prompts, ours, theirs, strict=True):
        rows = reference_rows(hf_engine.model, prompt, gen.token_ids)
        diff, shortfall = logprob_gaps(gen.token_ids, gen.logprobs, rows)
        worst_diff, worst_shortfall = max(worst_diff, diff), max(worst_shortfall, shortfall)
        same += sum(a == b for a, b in zip(gen.token_ids, ref_gen.token_ids, strict=False))
        total += len(gen.token_ids)
    ok = worst_diff <= atol and worst_shortfall <= atol
    detail = (
        f"{len(prompts)} prompts, {total} tokens; max |Δ log-prob| {worst_diff:.3f}, "
        f"max shortfall below the reference argmax {worst_shortfall:.3f} (tolerance {atol}); "
        f"{same}/{total} tokens as the transformers engine's own greedy decode"
    )
    return Check(name, ok, detail)


def rollout_checks(vllm: ModuleType, root: Path, atol: float) -> list[Check]:
    from safetensors.torch import load_file

    from services.rollout_worker.engines.transformers_engine import TransformersEngine
    from services.rollout_worker.engines.vllm_engine import VLLMEngine, llm_kwargs
    from services.rollout_worker.engines.weights_file import checkpoint_shapes
    from services.teacher_scorer.transformers_engine import load_teacher_model

    path, other = random_checkpoint(root, 0), random_checkpoint(root, 1)
    vocab = SPEC_FIELDS["vocab_size"]
    stop = [vocab - 1]
    kwargs = llm_kwargs(path, dtype="bfloat16", seed=0, gpu_memory_utilization=0.3, max_model_len=None)
    llm = vllm.LLM(**kwargs)
    engine = VLLMEngine(
        llm,
        vllm.SamplingParams,
        stop_token_ids=stop,
        vocab_size=vocab,
        checkpoint_weights=checkpoint_shapes(path),
        tied_embeddings=False,
        weights_dtype=torch.bfloat16,
    )
    hf = TransformersEngine(load_teacher_model(path, "cuda", "bfloat16"), stop, pad_token_id=0)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, vocab - 1, size=n).tolist() for n in (8, 20, 33, 50)]
    checks = [check_generate("rollout generate", engine, hf, prompts, atol)]
    from services.rollout_worker.engines import GenerationParams

    before = [g.token_ids for g in engine.generate(prompts, GenerationParams(16, 0.0, seed=0))]
    state = load_file(other / "model.safetensors")
    engine.load_weights(state, 1)
    hf.load_weights(state, 1)
    after = [g.token_ids for g in engine.generate(prompts, GenerationParams(16, 0.0, seed=0))]
    reloaded = check_generate("weight reload", engine, hf, prompts, atol)
    changed = engine.weights_version == 1 and before != after
    checks.append(
        Check(
            reloaded.name, reloaded.ok and changed, f"version 1, output changed: {changed}; {reloaded.detail}"
        )
    )
    shut_down(llm)
    return checks


def teacher_checks(root: Path, atol: float) -> list[Check]:
    from services.settings.teacher import TeacherSettings
    from services.teacher_scorer.engine import ScoreRow
    from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model
    from services.teacher_scorer.vllm_engine import VllmEngine

    path = random_checkpoint(root, 0)
    settings = TeacherSettings(
        model=str(path),
        engine="vllm",
        dtype="bfloat16",
        vllm_max_logprobs=20,
        vllm_gpu_memory_utilization=0.3,
    )
    vllm_teacher = VllmEngine.from_settings(settings)
    hf_teacher = TransformersEngine(load_teacher_model(path, "cuda", "bfloat16"))
    rng = np.random.default_rng(1)
    rows = [
        ScoreRow(rng.integers(0, SPEC_FIELDS["vocab_size"], size=n), np.arange(n // 2, n))
        for n in (16, 40, 64, vllm_teacher.max_context)
    ]
    top_k = 5
    ours, theirs = vllm_teacher.score(rows, top_k), hf_teacher.score(rows, top_k)
    bad, worst, worst_token = 0, 0.0, 0.0
    for a, b in zip(ours, theirs, strict=True):
        rows_bad, diff = topk_disagreement(
            a.top_ids_P_K, a.top_logprobs_P_K, b.top_ids_P_K, b.top_logprobs_P_K, atol
        )
        bad, worst = bad + rows_bad, max(worst, diff)
        worst_token = max(worst_token, float(np.abs(a.token_logprob_P - b.token_logprob_P).max()))
    positions = sum(len(r.positions_P) for r in rows)
    ok = bad == 0 and worst <= atol and worst_token <= atol
    detail = (
        f"{len(rows)} rows (the longest at the context limit {vllm_teacher.max_context}), {positions} positions, "
        f"top-{top_k}: {bad} positions with other ids, max |Δ top-K log-prob| {worst:.3f}, "
        f"max |Δ token log-prob| {worst_token:.3f} (tolerance {atol})"
    )
    shut_down(vllm_teacher._llm)
    return [Check("teacher scoring", ok, detail)]


def vllm_checks(args: argparse.Namespace) -> list[Check]:
    vllm = import_vllm()
    if vllm is None:
        return []
    with tempfile.TemporaryDirectory(prefix="turnopd-gpu-check-") as tmp:
        return rollout_checks(vllm, Path(tmp), args.atol) + teacher_checks(Path(tmp), args.atol)


# --- the CUDA part: throughput and MFU without Ray or vLLM ---------------------------------------


def measured(name: str, run: Callable[[], Any], peak: float | None) -> Check:
    """A throughput measurement as a check: it passes when it runs to the end."""
    try:
        result = run()
    except Exception as exc:  # report and go on to the next measurement
        return Check(name, False, f"{type(exc).__name__}: {exc}")
    finally:
        gc.collect()
        torch.cuda.empty_cache()
    return Check(name, True, result.line(peak))


def cuda_checks(args: argparse.Namespace) -> list[Check]:
    import gpu_throughput as gt

    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    peak = gt.peak_flops(name)
    peak_text = f"{peak / 1e12:.0f} TFLOP/s dense bf16" if peak else "peak unknown"
    print(f"CUDA part on {name} ({peak_text}); Qwen3-0.6B shape, {args.layers} layers, random weights, bf16")
    return [
        measured(
            "teacher scoring",
            lambda: gt.teacher_scoring(args.layers, rows=16, tokens=2048, top_k=50, device=device),
            peak,
        ),
        measured(
            "rollout generation",
            lambda: gt.rollout_generation(
                args.layers, prompts=32, prompt_tokens=512, new_tokens=128, device=device
            ),
            peak,
        ),
        measured(
            "learner update (FSDP2, NCCL, fp32 master, bf16 compute)",
            lambda: gt.learner_update(
                args.layers, args.learner_tokens, args.chunk, args.learner_steps, device
            ),
            peak,
        ),
    ]


PARTS: dict[str, Callable[[argparse.Namespace], list[Check]]] = {"cuda": cuda_checks, "vllm": vllm_checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(PARTS), action="append", help="run only these parts")
    parser.add_argument("--atol", type=float, default=0.5, help="bf16 tolerance on log-probs (nats)")
    parser.add_argument("--layers", type=int, default=28, help="CUDA part: decoder layers of the model")
    parser.add_argument("--learner-tokens", type=int, default=16384, help="CUDA part: one episode's length")
    parser.add_argument("--learner-steps", type=int, default=3, help="CUDA part: timed updates")
    parser.add_argument("--chunk", type=int, default=1024, help="CUDA part: [learner] logits_chunk_tokens")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to check (run it on a GPU machine)")
        return 0
    checks = []
    for part in args.only or PARTS:
        for check in PARTS[part](args):
            print(check.line(), flush=True)
            checks.append(check)
    return 1 if any(not c.ok for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
