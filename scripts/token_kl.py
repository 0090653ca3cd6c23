"""Reverse KL(model || teacher) on a fixed set of played trajectories, split by token class.

Reads the trajectories `turnopd eval --trajectories FILE` wrote, scores every response token with
each model and the teacher (full vocabulary, one forward pass per trajectory each), and prints per
model the mean KL on the tokens that are new against the response before (``novel``: where a
household thought decides), on the copied ones, on the tool call, and on all; and the share of the
summed KL on novel tokens. The trajectories stay fixed, so checkpoints of different runs are
compared on the same held-out tokens in seconds, where a 60-game greedy evaluation takes minutes
(docs/experiments.md, "Sample-efficiency settings").

    turnopd eval --config configs/demo.toml --model student-h10 --split train --episodes 12 \\
        --n 1 --temperature 1.0 --seed 3 --trajectories held_out.jsonl
    python scripts/token_kl.py held_out.jsonl --teacher teacher-novel \\
        --models student-h10 runs/opd/checkpoints/step_000008
"""

import argparse
import json
from pathlib import Path

from services.diagnostics.token_kl import ClassKL, empty_classes, kl_by_class, response_tokens


def full_reverse_kl(student_logits, teacher_logits):  # type: ignore[no-untyped-def]
    """Per-position KL(student || teacher) over the whole vocabulary."""
    import torch

    ls = torch.log_softmax(student_logits.float(), dim=-1)
    lt = torch.log_softmax(teacher_logits.float(), dim=-1)
    return (ls.exp() * (ls - lt)).sum(-1)


def main(argv: list[str] | None = None) -> None:
    import torch

    from services.models.loading import load_causal_lm, load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trajectories", type=Path)
    parser.add_argument("--teacher", required=True, help="zoo name or checkpoint path")
    parser.add_argument("--models", nargs="+", required=True, help="zoo names or checkpoint paths")
    args = parser.parse_args(argv)
    games = [json.loads(line) for line in args.trajectories.read_text().splitlines() if line.strip()]
    if not games:
        raise SystemExit(f"{args.trajectories} holds no trajectory")
    tokenizer = load_tokenizer(args.teacher)

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids))

    teacher = load_causal_lm(args.teacher)
    classes = [
        response_tokens(
            g["token_ids"], [(t["response_start"], t["response_end"]) for t in g["turns"]], decode
        )
        for g in games
    ]
    with torch.no_grad():
        teacher_logits = [teacher(torch.tensor([g["token_ids"]])).logits[0] for g in games]
    print(f"{len(games)} trajectories, teacher {args.teacher}")
    print(f"{'model':56s} {'novel':>7s} {'copied':>7s} {'call':>7s} {'all':>7s} {'novel share':>11s}")
    sums: dict[str, ClassKL] = empty_classes()
    for name in args.models:
        model = load_causal_lm(name)
        sums = empty_classes()
        with torch.no_grad():
            for game, tokens, t_logits in zip(games, classes, teacher_logits, strict=True):
                kl_N = full_reverse_kl(model(torch.tensor([game["token_ids"]])).logits[0], t_logits)
                kl_by_class(kl_N.tolist(), tokens, sums)
        share = sums["novel"].total / sums["all"].total if sums["all"].total else 0.0
        means = " ".join(f"{sums[c].mean:7.4f}" for c in ("novel", "copied", "call", "all"))
        print(f"{name[-56:]:56s} {means} {share:11.1%}")
    print("tokens: " + ", ".join(f"{c} {sums[c].tokens}" for c in ("novel", "copied", "call", "all")))


if __name__ == "__main__":
    main()
