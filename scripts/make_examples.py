"""Write the bundled example inputs of `turnopd controller replay` and `turnopd diagnose`.

A small *synthetic* vanilla-OPD run (no model involved): per-token KL that decays with turn depth
and with training progress, successes that grow more frequent and finish in 4-14 turns, failures
that stall until the turn cap with compressed (lower) KL, as the paper's Section 4 describes.
Deterministic given --seed, so the committed files can be regenerated and checked.

    python scripts/make_examples.py [--out examples] [--steps 60] [--seed 0]
"""

import argparse
import json
import math
import random
from pathlib import Path

BATCH = 32
MAX_TURNS = 30


def simulate_step(rng: random.Random, k: int, steps: int) -> list[dict]:
    progress = k / steps
    trajectories = []
    for _ in range(BATCH):
        success = rng.random() < 0.1 + 0.7 * progress
        turns = rng.randint(4, 14) if success else MAX_TURNS
        tokens = [rng.randint(8, 30) for _ in range(turns)]
        kl_sums = []
        for t, n in enumerate(tokens):
            per_token = 1.5 * math.exp(-3 * progress) * math.exp(-t / 8) + 0.08
            if not success:
                per_token *= math.exp(-t / 20)  # failed branches compress deeper KL
            kl_sums.append(round(n * per_token * rng.uniform(0.7, 1.3), 6))
        trajectories.append(
            {"turn_tokens": tokens, "turn_kl_sum": kl_sums, "success": success, "truncated": False}
        )
    return trajectories


def probe_snapshot(k: int, trajectories: list[dict]) -> dict:
    depth = max(len(t["turn_tokens"]) for t in trajectories)
    survivors, kl = [], []
    for t in range(depth):
        live = [tr for tr in trajectories if len(tr["turn_tokens"]) > t]
        survivors.append(len(live))
        kl.append(
            round(sum(tr["turn_kl_sum"][t] for tr in live) / sum(tr["turn_tokens"][t] for tr in live), 6)
        )
    success_turns = [len(tr["turn_tokens"]) - 1 for tr in trajectories if tr["success"]]
    return {"step": k, "kl_per_turn": kl, "survivors": survivors, "success_turns": success_turns}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("examples"))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    run_dir = args.out / "vanilla_run"
    run_dir.mkdir(parents=True, exist_ok=True)
    with (args.out / "probes.jsonl").open("w") as probes, (run_dir / "turn_stats.jsonl").open("w") as stats:
        for k in range(1, args.steps + 1):
            trajectories = simulate_step(rng, k, args.steps)
            record = {
                "step": k,
                "probe": True,
                "alpha": 0.0,
                "h_roll": MAX_TURNS,
                "trajectories": trajectories,
            }
            stats.write(json.dumps(record) + "\n")
            probes.write(json.dumps(probe_snapshot(k, trajectories)) + "\n")
    print(f"wrote {args.out / 'probes.jsonl'} and {run_dir / 'turn_stats.jsonl'} ({args.steps} steps)")


if __name__ == "__main__":
    main()
