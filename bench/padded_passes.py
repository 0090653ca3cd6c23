"""Padded forward passes with and without the padding mask, side by side, at the demo's shapes.

The learner and the teacher's `transformers` engine run several right-padded episodes in one
forward pass. Under causal attention a real token attends only to the real tokens before it, so
the padding mask changes nothing they compute (``tests/unit/learner/test_objective.py`` checks it
bit for bit), but with a mask the attention takes its masked path. This bench times, on the
shipped student and teacher (``student-novel-noisy``, ``teacher-novel``), one step's episodes of a
full-depth step and of a truncated one (``--full`` / ``--truncated`` turns per episode):

* **learner**: each of the step's ``--mini-batches`` mini-batches (trajectory i in mini-batch
  i mod m) as the learner plans it, forward + backward:
  - before: rows greedily paired up to ``[learner] token_budget`` padded tokens, with the mask;
  - after: ``plan_micro_batches`` at ``[learner] pass_overhead_tokens`` (0), without the mask;
* **teacher**: the step's episodes packed as the scorer packs them (``pack_by_length`` at the
  teacher's defaults), forward under ``inference_mode``, with the mask (before) and without (after),
  and each episode alone.

Each arm runs ``--rounds`` times, the arms interleaved; the best round is printed with the ratios
measured in the same run. An episode is ``--prompt`` tokens plus ``--turn`` tokens a turn, spread
by ``--jitter`` (the demo's shapes, as in ``bench/decode_ceiling.py``: a 310-token first prompt,
64-token responses, 83-token observations). The ceiling line is the
forward's arithmetic (2 x parameters below the head per token, plus causal attention) at the
measured ``torch.mm`` rate of this machine's threads.

    PYTHONPATH=$PWD python bench/padded_passes.py [--rounds 3] [--threads 2]
"""

import argparse
import time
from collections.abc import Callable, Sequence

import torch

from services.learner.objective import final_hidden_states, plan_micro_batches
from services.models.loading import load_causal_lm
from services.packing import pack_by_length
from services.settings.learner import LearnerSettings
from services.settings.teacher import TeacherSettings


def greedy_pairs(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """The learner's former plan: longest first, a row joins the last group while rows x its first
    (longest) row's length fits the budget."""
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= token_budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def padded(lengths: Sequence[int], vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (len(lengths), max(lengths)), generator=gen)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = 0
    return ids, mask


def learner_pass(model: torch.nn.Module, lengths: Sequence[int], masked: bool) -> None:
    ids, mask = padded(lengths, model.config.vocab_size, len(lengths))
    if masked:
        hidden = model.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    else:
        hidden = final_hidden_states(model, ids)
    (hidden[mask.bool()].float().pow(2).mean()).backward()
    model.zero_grad(set_to_none=True)


def teacher_pass(model: torch.nn.Module, lengths: Sequence[int], masked: bool) -> None:
    ids, mask = padded(lengths, model.config.vocab_size, len(lengths))
    with torch.inference_mode():
        model.model(input_ids=ids, attention_mask=mask if masked else None, use_cache=False)


def timed(run: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def forward_flops(model: torch.nn.Module, lengths: Sequence[int]) -> float:
    """A forward's multiply-adds x 2 over the real tokens: projections and MLP (parameters below the
    head) plus causal attention (QK and AV: 2 x heads x head_dim x L^2 / 2 per layer)."""
    c = model.config
    body = sum(p.numel() for p in model.model.parameters()) - model.model.embed_tokens.weight.numel()
    attention = c.num_hidden_layers * c.num_attention_heads * c.head_dim
    return sum(2.0 * body * n + 2.0 * attention * n * n for n in lengths)


def mm_rate(seconds: float = 1.0) -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.mm(a, b)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        n += 1
    return n * 2 * 1024**3 / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", default="40,40,40,40,40,12,14,10", help="turns per episode, full depth")
    parser.add_argument("--truncated", default="24,24,24,24,24,12,14,10", help="turns, truncated step")
    parser.add_argument("--prompt", type=int, default=310, help="first prompt's tokens")
    parser.add_argument("--turn", type=int, default=147, help="tokens a turn: response 64, observation 83")
    parser.add_argument("--jitter", type=float, default=0.05, help="spread of an episode's tokens a turn")
    parser.add_argument("--mini-batches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    learner_settings, teacher_settings = LearnerSettings(), TeacherSettings()
    student = load_causal_lm("student-novel-noisy", device="cpu", dtype="float32").train()
    teacher = load_causal_lm("teacher-novel", device="cpu", dtype="float32").eval()
    peak = mm_rate()
    print(f"torch.mm 1024^3 on {args.threads} threads: {peak / 1e9:.1f} GFLOP/s")
    for name, spec in (("full-depth step", args.full), ("truncated step", args.truncated)):
        gen = torch.Generator().manual_seed(0)
        spread = 1.0 + args.jitter * (2.0 * torch.rand(len(spec.split(",")), generator=gen) - 1.0)
        lengths = [
            args.prompt + round(args.turn * int(t) * float(f))
            for t, f in zip(spec.split(","), spread, strict=True)
        ]
        minis = [
            [lengths[i] for i in range(m, len(lengths), args.mini_batches)] for m in range(args.mini_batches)
        ]
        old_learner = [
            [[mb[i] for i in g] for g in greedy_pairs(mb, learner_settings.token_budget)] for mb in minis
        ]
        new_learner = [
            [
                [mb[i] for i in g]
                for g in plan_micro_batches(
                    mb, learner_settings.token_budget, learner_settings.pass_overhead_tokens
                )
            ]
            for mb in minis
        ]
        teacher_passes = [
            [lengths[i] for i in p]
            for p in pack_by_length(
                lengths,
                teacher_settings.token_budget,
                teacher_settings.max_batch_size,
                teacher_settings.pass_overhead_tokens,
            )
        ]
        arms: dict[str, Callable[[], None]] = {
            "learner, paired + mask (before)": lambda o=old_learner: [
                learner_pass(student, g, True) for m in o for g in m
            ],
            "learner, planned, no mask (after)": lambda n=new_learner: [
                learner_pass(student, g, False) for m in n for g in m
            ],
            "teacher, packed + mask (before)": lambda p=teacher_passes: [
                teacher_pass(teacher, g, True) for g in p
            ],
            "teacher, packed, no mask (after)": lambda p=teacher_passes: [
                teacher_pass(teacher, g, False) for g in p
            ],
            "teacher, one episode a pass": lambda e=lengths: [teacher_pass(teacher, [n], False) for n in e],
        }
        best = {arm: float("inf") for arm in arms}
        for _ in range(args.rounds):
            for arm, run in arms.items():
                best[arm] = min(best[arm], timed(run))
        print(f"\n{name}: episodes of {spec} turns = {lengths} tokens")
        print(f"  learner groups before {[g for m in old_learner for g in m]}")
        print(f"  learner groups after  {[g for m in new_learner for g in m]}")
        print(f"  teacher passes        {teacher_passes}")
        for arm, seconds in best.items():
            print(f"  {arm:36s} {seconds:7.3f} s")
        print(
            f"  learner before / after: {best['learner, paired + mask (before)'] / best['learner, planned, no mask (after)']:.2f}x"
        )
        print(
            f"  teacher before / after: {best['teacher, packed + mask (before)'] / best['teacher, packed, no mask (after)']:.2f}x"
        )
        flops = forward_flops(teacher, lengths)
        rate = flops / best["teacher, packed, no mask (after)"]
        print(
            f"  teacher forward, no mask: {rate / 1e9:.1f} GFLOP/s of arithmetic on real tokens, "
            f"{peak / rate:.1f}x under the torch.mm rate"
        )


if __name__ == "__main__":
    main()
