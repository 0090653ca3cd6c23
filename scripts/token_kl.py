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

from services.diagnostics.token_kl import empty_classes, kl_by_class, response_tokens


def main(argv: list[str] | None = None) -> None:
    import torch

    from services.learner.topk_kl import support_reverse_kl
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
        teacher_logprobs = [
            torch.log_softmax(teacher(torch.tensor([g["token_ids"]])).logits[0].float(), dim=-1)
            for g in games
        ]
    print(f"{len(games)} trajectories, teacher {args.teacher}")
    print(f"{'model':56s} {'novel':>7s} {'copied':>7s} {'call':>7s} {'all':>7s} {'novel share':>11s}")
    for name in args.models:
        model = load_causal_lm(name)
        sums = empty_classes()
        with torch.no_grad():
            for game, tokens, lt_N_V in zip(games, classes, teacher_logprobs, strict=True):
                ls_N_V = torch.log_softmax(model(torch.tensor([game["token_ids"]])).logits[0].float(), dim=-1)
                # over the whole vocabulary, "renorm" is the plain reverse KL (both sides already sum to 1)
                kl_by_class(support_reverse_kl(ls_N_V, lt_N_V, "renorm").tolist(), tokens, sums)
        share = sums["novel"].total / sums["all"].total if sums["all"].total else 0.0
        means = " ".join(f"{sums[c].mean:7.4f}" for c in ("novel", "copied", "call", "all"))
        print(f"{name[-56:]:56s} {means} {share:11.1%}")
    every = [token for tokens in classes for token in tokens]
    novel, call = sum(t.novel for t in every), sum(t.in_call for t in every)
    print(f"tokens: novel {novel}, copied {len(every) - novel}, call {call}, all {len(every)}")


if __name__ == "__main__":
    main()
