"""How close the demo's student gets to its teacher: success after each evaluation, as a share of the teacher's.

Runs `turnopd train` on the demo's configuration (or another) for ``--steps`` steps, evaluating the
student greedily on the demo's 60 valid_unseen games every ``--eval-every`` steps, then prints each
evaluation against the teacher's success on the same games (read from the teacher's shipped
manifest, which records how it was measured). Every rate carries its 95% Wilson interval, so a
ratio is only as sharp as 60 games allow (about +-12 points around 50%). The paper reports
94-101% of the teacher.

    PYTHONPATH=$PWD python bench/student_vs_teacher.py [--config configs/demo.toml] [--steps 32] [--eval-every 8]
    PYTHONPATH=$PWD python bench/student_vs_teacher.py --run-dir runs/demo-...   # report an existing run only
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.models.registry import resolve_model_dir
from services.models.shipped import measured_success
from services.orchestrator.run_result import comparable_measurement, wilson_interval
from services.run_dir import CONFIG_FILE, EVAL_FILE, METRICS_FILE, RunDir
from services.settings.tree import TurnOPDSettings


def _train(config: Path, steps: int, eval_every: int, run_dir: Path) -> float:
    env = {**os.environ, "TURNOPD_EVAL__INTERVAL": str(eval_every)}
    command = [sys.executable, "-m", "services.cli", "train", "--config", str(config), "--steps", str(steps)]
    started = time.perf_counter()
    subprocess.run([*command, "--run-dir", str(run_dir)], env=env, check=True)
    return time.perf_counter() - started


def _pct(rate: float, episodes: int) -> str:
    low, high = wilson_interval(round(rate * episodes), episodes)
    return f"{100 * rate:5.1f}% [{100 * low:3.0f},{100 * high:3.0f}]"


def report(run_dir: Path, wall_s: float | None) -> None:
    settings = TurnOPDSettings.model_validate_json(RunDir(run_dir).saved_config())
    from services.cli.result_view import eval_description

    measured = measured_success(resolve_model_dir(settings.models.teacher, settings.models.cache_dir))
    ok, note = comparable_measurement(measured, eval_description(settings))
    evals = sorted(read_jsonl(run_dir / EVAL_FILE, EvalRecord), key=lambda e: e.step)
    metrics = read_jsonl(run_dir / METRICS_FILE, StepMetrics)
    step_s = {m.step: m.cumulative_s for m in metrics}
    teacher = float(measured["success_rate"]) if ok and measured else None
    print(f"run {run_dir}: {settings.models.student} from {settings.models.teacher}, {len(metrics)} steps")
    print(
        f"teacher: {_pct(teacher, int(measured['episodes'])) if teacher is not None and measured else '-'} ({note})"
    )
    print(f"{'after step':>10}  {'step time s':>11}  {'student success [95%]':>22}  {'of teacher':>10}")
    for e in evals:
        ratio = f"{100 * e.success_rate / teacher:9.0f}%" if teacher else "         -"
        print(
            f"{e.step:>10}  {step_s.get(e.step, 0.0):>11.0f}  {_pct(e.success_rate, e.episodes):>22}  {ratio}"
        )
    if wall_s is not None:
        print(f"wall time {wall_s / 60:.1f} min (start-up and evaluations included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/demo.toml"))
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=8)
    parser.add_argument("--run-dir", type=Path, help="Report this existing run instead of training.")
    args = parser.parse_args()
    if args.run_dir is not None and (args.run_dir / CONFIG_FILE).is_file():
        report(args.run_dir, None)
        return
    run_dir = args.run_dir or Path(f"runs/student-vs-teacher-{time.strftime('%Y%m%d-%H%M%S')}")
    report(run_dir, _train(args.config, args.steps, args.eval_every, run_dir))


if __name__ == "__main__":
    main()
