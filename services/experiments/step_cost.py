"""The time to threshold at one machine speed (pure): the frontier's time ratio without the hosts.

A frontier's runs take hours, so they may run on different hosts and in busier or quieter hours,
and a run on a slower host takes longer for the same work. The measured time ratio then carries
the hosts' difference along with the methods'. This module re-costs every step at one speed.

**The model.** A step's seconds are

    s = v_run * (a * T + b * T^2 / E)

- ``T`` is the step's trained tokens in thousands, and ``E`` its episodes.
- ``a * T`` is the work per token: the rollout's decode, the teacher's and the learner's passes.
- ``b * T^2 / E`` is the work that grows with the episodes' lengths (``T / E`` tokens each):
  attention over longer contexts, and a rollout that waits for its longest episode.
- ``v_run`` is the run's speed factor: its host and its hour.

The fit is alternating least squares over every step of every run: ``a`` and ``b`` given the
speeds, then each speed given ``a`` and ``b``. The speeds are scaled to a geometric mean of 1.
Both methods run the same code, so ``a`` and ``b`` are shared; only the depth cap differs, and
that reaches the model through ``T`` and ``T / E``.

**The time at one speed.** A seed's time is the sum of ``a * T + b * T^2 / E`` over its steps up
to the step where it first reached the threshold (``frontier.seed_reach``). The ratio is of the
methods' seed means, as for the measured times.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.contracts.experiments import ComparisonSummary
from services.contracts.orchestrator import StepMetrics
from services.errors import InputError
from services.experiments.frontier import MethodFrontier, time_ratio
from services.experiments.protocols import BASELINE, TURNOPD, seed_mean
from services.experiments.tables import Table, duration

RunKey = tuple[str, int]  # (method, seed)
ITERATIONS = 200


def _features(tokens: int, episodes: int) -> tuple[float, float]:
    """(T, T^2 / E) of one step: T its trained tokens in thousands, E its episodes (none: 0)."""
    kilo = tokens / 1000.0
    return kilo, (kilo * kilo / episodes) if episodes > 0 else 0.0


@dataclass(frozen=True)
class StepCostModel:
    """Seconds per thousand tokens (``a``), per thousand tokens squared over episodes (``b``), each
    run's speed factor, and the share of the steps' variance the fit explains."""

    a: float
    b: float
    speeds: Mapping[RunKey, float]
    r2: float
    steps: int  # the steps the fit read

    def step_seconds(self, tokens: int, episodes: int) -> float:
        """The modeled seconds at speed 1 of a step that trains ``tokens`` over ``episodes``."""
        kilo, spread = _features(tokens, episodes)
        return self.a * kilo + self.b * spread

    def seconds(self, m: StepMetrics) -> float:
        """The step's modeled seconds at speed 1."""
        return self.step_seconds(m.tokens, m.trajectories)


def fit_step_cost(
    runs: Mapping[RunKey, Sequence[StepMetrics]], iterations: int = ITERATIONS
) -> StepCostModel:
    """Fit ``a``, ``b`` and one speed per run to every step's ``times.total_s``."""
    keys = [k for k, steps in runs.items() if steps]
    if not keys:
        raise InputError("the step-cost fit needs at least one run with steps")
    rows = [
        (i, *_features(m.tokens, m.trajectories), m.times.total_s)
        for i, k in enumerate(keys)
        for m in runs[k]
    ]
    run = np.array([r[0] for r in rows], dtype=np.int64)
    x = np.array([[r[1], r[2]] for r in rows], dtype=np.float64)
    y = np.array([r[3] for r in rows], dtype=np.float64)
    if len(rows) < 3 or np.linalg.matrix_rank(x) < 2:
        raise InputError(
            f"the step-cost fit needs steps of different token counts and lengths; got {len(rows)} steps"
        )
    speeds = np.ones(len(keys))
    for _ in range(iterations):
        coef = np.linalg.lstsq(x * speeds[run, None], y, rcond=None)[0]
        pred = x @ coef
        for i in range(len(keys)):
            mine = run == i
            power = float(pred[mine] @ pred[mine])
            speeds[i] = float(y[mine] @ pred[mine]) / power if power > 0.0 else 1.0
        if np.any(speeds <= 0.0):
            break
        scale = math.exp(float(np.mean(np.log(speeds))))
        speeds /= scale
    coef = np.linalg.lstsq(x * speeds[run, None], y, rcond=None)[0]
    fitted = speeds[run] * (x @ coef)
    if np.any(speeds <= 0.0) or np.any(fitted <= 0.0):
        raise InputError(
            "the step-cost fit gives some step a time <= 0: the steps' times do not grow with their tokens"
        )
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fitted) ** 2).sum()) / total if total > 0.0 else 1.0
    return StepCostModel(
        a=float(coef[0]),
        b=float(coef[1]),
        speeds={k: float(speeds[i]) for i, k in enumerate(keys)},
        r2=r2,
        steps=len(rows),
    )


@dataclass(frozen=True)
class SpeedReach:
    """One seed's time to the threshold, measured and at speed 1 (None: never reached)."""

    seed: int
    step: int | None
    measured_s: float | None
    one_speed_s: float | None


@dataclass(frozen=True)
class OneSpeed:
    """The fit, every method's seeds' times to the threshold at speed 1, and each run's steps' seconds
    at speed 1 (in step order)."""

    model: StepCostModel
    reaches: Mapping[str, list[SpeedReach]]
    step_s: Mapping[RunKey, list[float]]

    def steps_ratio(self, k: int) -> float | None:
        """Vanilla's first ``k`` steps over TurnOPD's, at speed 1, summed over seeds (None: a method
        has no run, or a run fewer than ``k`` steps)."""
        sums = {}
        for method in (BASELINE, TURNOPD):
            runs = [v for (m, _), v in self.step_s.items() if m == method]
            if not runs or any(len(v) < k for v in runs):
                return None
            sums[method] = sum(sum(v[:k]) for v in runs)
        return None if sums[TURNOPD] <= 0.0 else sums[BASELINE] / sums[TURNOPD]

    def mean_s(self, method: str) -> float | None:
        """The method's seed mean at speed 1; None unless every seed reached the threshold."""
        return seed_mean([r.one_speed_s for r in self.reaches.get(method, [])])

    @property
    def ratio(self) -> float | None:
        """Vanilla's mean time to the threshold over TurnOPD's, both at speed 1."""
        return time_ratio(self.mean_s(BASELINE), self.mean_s(TURNOPD))


def one_speed(
    methods: Mapping[str, MethodFrontier], runs: Mapping[RunKey, Sequence[StepMetrics]]
) -> OneSpeed | None:
    """Each seed's time to the threshold at speed 1; None when the frontier has no threshold."""
    if any(f.reach is None for f in methods.values()):
        return None
    model = fit_step_cost(runs)
    reaches: dict[str, list[SpeedReach]] = {}
    for name, f in methods.items():
        assert f.reach is not None
        out = []
        for s in f.reach.seeds:
            if (name, s.seed) not in runs:
                raise InputError(f"no step metrics for {name} seed {s.seed}")
            cost = None
            if s.step is not None:
                cost = sum(model.seconds(m) for m in runs[name, s.seed] if m.step <= s.step)
            out.append(SpeedReach(seed=s.seed, step=s.step, measured_s=s.wall_s, one_speed_s=cost))
        reaches[name] = out
    step_s = {k: [model.seconds(m) for m in sorted(v, key=lambda m: m.step)] for k, v in runs.items()}
    return OneSpeed(model=model, reaches=reaches, step_s=step_s)


def steps_ratio_table(result: OneSpeed, steps: Sequence[int]) -> Table:
    """Vanilla's steps over TurnOPD's at speed 1, over the first k steps for each k in ``steps``."""
    kept = [k for k in steps if k > 0 and result.steps_ratio(k) is not None]
    return Table(
        title="Steps' cost at one machine speed, vanilla / TurnOPD",
        header=["First k steps", *(str(k) for k in kept)],
        rows=[["vanilla / TurnOPD", *(f"{result.steps_ratio(k):.2f}" for k in kept)]],
        note="The seeds' summed step seconds at speed 1 (the fit above). Where the two learn alike per "
        "step, the time ratio to a threshold is this ratio at the step they reach it.",
    )


def one_speed_table(summary: ComparisonSummary, result: OneSpeed) -> Table:
    """One row per run (the summary's order): its speed factor and its time to the threshold."""
    body = []
    for name, method in summary.methods.items():
        if name not in result.reaches:
            continue  # an arm left out of the fit (bench/frontier.py --system: the pipelined steps)
        by_seed = {r.seed: r for r in result.reaches[name]}
        for score in method.runs:
            r = by_seed[score.seed]
            body.append(
                [
                    f"{name} seed {score.seed}",
                    f"{result.model.speeds[name, score.seed]:.2f}",
                    "-" if r.step is None else str(r.step),
                    "-" if r.measured_s is None else duration(r.measured_s),
                    "-" if r.one_speed_s is None else duration(r.one_speed_s),
                ]
            )
    model = result.model
    ratio = result.ratio
    return Table(
        title="Time to the threshold at one machine speed",
        header=["Run", "Speed factor", "Step reached", "Measured", "At speed 1"],
        rows=body,
        note=f"Every step re-costed as {model.a:.2f} s per 1k trained tokens + {model.b:.3f} s per "
        f"(1k tokens)^2 / episodes, fit over all {model.steps} steps of all runs with one speed "
        f"factor per run (its host and hour; 1 = their geometric mean; R^2 {model.r2:.3f}). "
        + (
            "vanilla / TurnOPD at one speed: none (a seed never reached the threshold)."
            if ratio is None
            else f"vanilla / TurnOPD at one speed: {ratio:.2f}x (target >= 1.5x)."
        ),
    )


def one_speed_json(result: OneSpeed) -> dict[str, Any]:
    model = result.model
    return {
        "a_s_per_ktoken": model.a,
        "b_s_per_ktoken2_per_episode": model.b,
        "r2": model.r2,
        "steps": model.steps,
        "speeds": [{"method": m, "seed": s, "speed": v} for (m, s), v in model.speeds.items()],
        "reach": {
            name: [
                {"seed": r.seed, "step": r.step, "measured_s": r.measured_s, "one_speed_s": r.one_speed_s}
                for r in reaches
            ]
            for name, reaches in result.reaches.items()
        },
        "mean_s": {name: result.mean_s(name) for name in result.reaches},
        "steps_ratio": {
            str(k): result.steps_ratio(k)
            for k in range(1, 1 + max((len(v) for v in result.step_s.values()), default=0))
        },
        "ratio_vanilla_over_turnopd": result.ratio,
    }
