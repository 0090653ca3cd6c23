"""The demo's evaluation with the rollout engine before and after the KV slots, side by side in one run.

Runs `turnopd eval --json` on the demo's games (configs/demo.toml: 60 valid_unseen games, greedy,
its two rollout workers) three times with the same seed: with ``TURNOPD_MODELS__KV_SLOTS=false``
(the Hugging Face path, a ``DynamicCache`` per call with prefixes reused: the engine before issue
34), with the slots on torch's ops (``TURNOPD_MODELS__NATIVE_KERNELS=false``), then with the slots
on the compiled decode kernels (the default). Prints each side's play time (the report's
``wall_s``: from the first episode to the last), the whole command's time (start-up of the Ray
cluster, gateway and workers included), tokens/s and greedy success with its 95% Wilson interval,
then the ratios to the first. Greedy on every path, so the games should play out the same up to
float ties.

    PYTHONPATH=$PWD python bench/eval_engines.py [--config configs/demo.toml] [--model student-novel-cut3] [--episodes 60]

Run it on a quiet machine (Ray starts its workers at nice 15: anything else running takes their CPU).
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from services.contracts.rollout import EvalReport
from services.orchestrator.run_result import wilson_interval

SIDES = {  # name: environment (the settings' overrides)
    "Hugging Face path (before)": {"TURNOPD_MODELS__KV_SLOTS": "false"},
    "KV slots, torch ops": {"TURNOPD_MODELS__NATIVE_KERNELS": "false"},
    "KV slots, kernels (now)": {},
}


def evaluate(config: Path, model: str, episodes: int, overrides: dict[str, str]) -> tuple[EvalReport, float]:
    """One `turnopd eval --json` and its wall time (seconds)."""
    env = {**os.environ, **overrides}
    command = [sys.executable, "-m", "services.cli", "eval", "--config", str(config), "--model", model]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--episodes", str(episodes), "--json"], env=env, check=True, capture_output=True, text=True
    )
    return EvalReport.model_validate_json(done.stdout.strip().splitlines()[-1]), time.perf_counter() - started


def success(report: EvalReport) -> str:
    wins = round(report.success_rate * report.episodes)
    low, high = wilson_interval(wins, report.episodes)
    return f"{100 * report.success_rate:.1f}% [{100 * low:.1f}, {100 * high:.1f}] ({wins}/{report.episodes})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/demo.toml"))
    parser.add_argument("--model", default="student-novel-cut3")
    parser.add_argument("--episodes", type=int, default=60)
    args = parser.parse_args()
    sides = {}
    for name, overrides in SIDES.items():
        print(f"evaluating {args.model} on {args.episodes} games: {name} ...", flush=True)
        sides[name] = evaluate(args.config, args.model, args.episodes, overrides)
    print(
        f"\n{'engine':<28} {'play s':>8} {'command s':>10} {'tokens':>9} {'tok/s':>7}  success (greedy) [95%]"
    )
    for name, (report, wall) in sides.items():
        rate = report.generated_tokens / max(report.wall_s, 1e-9)
        print(
            f"{name:<28} {report.wall_s:8.1f} {wall:10.1f} {report.generated_tokens:9,} {rate:7.0f}  {success(report)}"
        )
    before, before_wall = sides[next(iter(SIDES))]
    for name, (after, after_wall) in list(sides.items())[1:]:
        print(
            f"\n{name}: play time before / it: {before.wall_s / after.wall_s:.2f}x; "
            f"whole command: {before_wall / after_wall:.2f}x; tokens/s: "
            f"{(after.generated_tokens / after.wall_s) / (before.generated_tokens / before.wall_s):.2f}x"
        )


if __name__ == "__main__":
    main()
