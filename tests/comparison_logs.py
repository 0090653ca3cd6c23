"""Hand-made run logs for the comparison and report tests: metrics, evaluations, turn statistics."""

import json
from pathlib import Path

from services.contracts.controller import StepDecision
from services.contracts.orchestrator import EvalRecord, SourceStepMetrics, StepMetrics, StepTimes
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.experiments.compare_dir import settings_json
from services.experiments.protocols import RunLogs
from services.run_dir import SECRET_FIELDS
from services.settings import TurnOPDSettings


def step_metrics(step: int, step_s: float, method: str = "vanilla", h_roll: int = 6) -> StepMetrics:
    """Step ``step`` of a run whose every step takes ``step_s`` seconds (60% rollout, 10% teacher, ...)."""
    times = StepTimes(
        rollout_s=0.6 * step_s,
        teacher_s=0.1 * step_s,
        learner_s=0.2 * step_s,
        other_s=0.1 * step_s,
        total_s=step_s,
    )
    return StepMetrics(
        step=step, method=method, probe=step <= 2, h_roll=h_roll, h_hat=h_roll, h_bar=float(h_roll - 1),
        h_eff=2 if step <= 2 else None, h_cov=0, h_ctrl=2 if step <= 2 else None, alpha=0.0, loss=0.5,
        mean_kl=0.5, grad_norm=1.0, success_rate=0.5, truncated_rate=0.0, mean_turns=3.0, trajectories=4,
        failed_episodes=0, tokens=100, generated_tokens=120, weights_version=step, times=times,
        cumulative_s=step * step_s,
    )  # fmt: skip


def source_part(env: str, h_hat: int, alpha: float, probe: bool = False) -> SourceStepMetrics:
    """One task source's part of a step of a multi-environment run: 4 trajectories, half succeeded."""
    return SourceStepMetrics(
        env=env, probe=probe, h_roll=h_hat, h_hat=h_hat, h_bar=h_hat - 0.5, h_eff=None, h_cov=h_hat,
        h_ctrl=None, alpha=alpha, success_rate=0.5, mean_turns=3.0, trajectories=4, failed_episodes=0,
    )  # fmt: skip


def eval_record(step: int, cumulative_s: float, acc: float) -> EvalRecord:
    """Avg@n ``acc``; task type ``a`` scores ``acc`` and ``b`` scores ``1 - acc``."""
    return EvalRecord(
        step=step, cumulative_s=cumulative_s, split="valid_unseen", episodes=4, n=1, success_rate=acc,
        avg_at_n=acc, per_task_type={"a": acc, "b": 1.0 - acc},
    )  # fmt: skip


def run_logs(method: str, seed: int, step_s: float, accs: list[float]) -> RunLogs:
    """A run of len(accs) - 1 steps, evaluated before step 1 and after every step."""
    steps = len(accs) - 1
    return RunLogs(
        method=method,
        seed=seed,
        run_dir=f"runs/{method}/seed{seed}",
        metrics=[step_metrics(k, step_s, method) for k in range(1, steps + 1)],
        evals=[eval_record(k, k * step_s, acc) for k, acc in enumerate(accs)],
    )


def turn_stats(step: int, alpha: float, probe: bool) -> TurnStatsRecord:
    """Four trajectories of 3, 3, 2 and 1 turns; the two longest succeed; entropy recorded."""

    def traj(n: int, success: bool) -> TrajectoryTurnStats:
        return TrajectoryTurnStats(
            turn_tokens=[4] * n,
            turn_kl_sum=[2.0 / (t + 1) for t in range(n)],
            success=success,
            truncated=False,
            turn_entropy_sum=[1.0 + t for t in range(n)],
        )

    trajs = [traj(3, True), traj(3, True), traj(2, False), traj(1, False)]
    return TurnStatsRecord(step=step, probe=probe, alpha=alpha, h_roll=6, trajectories=trajs)


def decision(step: int) -> StepDecision:
    probe = step <= 2 or step % 2 == 0
    return StepDecision(
        step=step, probe=probe, h_roll=6 if probe else 3, h_hat=3, h_bar=2.0 + 0.1 * step,
        h_eff=1 if probe else None, h_cov=2, h_ctrl=2 if probe else None,
    )  # fmt: skip


def write_run(root: Path, logs: RunLogs) -> Path:
    """A run directory as `turnopd train` leaves it (config, metrics, eval, turn stats, decisions)."""
    root.mkdir(parents=True, exist_ok=True)
    settings = TurnOPDSettings.model_validate(
        {
            "run": {"method": logs.method, "seed": logs.seed, "run_dir": str(root)},
            "optim": {"steps": len(logs.metrics)},
        }
    )
    (root / "config.json").write_text(settings.model_dump_json())
    (root / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in logs.metrics))
    (root / "eval.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in logs.evals))
    steps = [m.step for m in logs.metrics]
    (root / "turn_stats.jsonl").write_text(
        "".join(turn_stats(k, k / len(steps), k <= 2).model_dump_json() + "\n" for k in steps)
    )
    (root / "controller.jsonl").write_text("".join(decision(k).model_dump_json() + "\n" for k in steps))
    return root


def materialise_run(settings: TurnOPDSettings, steps_done: int) -> Path:
    """Leave a run dir as `turnopd compare` would: its config.json, ``steps_done`` steps of metrics
    and the evaluation after the last of them (Avg@n 0.5)."""
    path = settings.run.run_dir
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(settings_json(settings, SECRET_FIELDS)))
    (path / "metrics.jsonl").write_text(
        "".join(step_metrics(k, 1.0).model_dump_json() + "\n" for k in range(1, steps_done + 1))
    )
    (path / "eval.jsonl").write_text(eval_record(steps_done, float(steps_done), 0.5).model_dump_json() + "\n")
    return path
