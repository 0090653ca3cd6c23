"""How fast a run's steps went and how busy the machine was (``bench/pipeline_modes.py``); pure functions.

* Steps per hour over steps 2..N: the interval between the completions of step 1 and step N,
  so the first step's warm-up and the evaluation after the last one are left out.
* CPU utilisation: the share of the machine's CPU time (all cores, ``/proc/stat``'s ``cpu`` line)
  that was not idle between two readings.
* The separate-machines model: if each pool (rollout, teacher, learner) had hardware of its own
  and the pipeline kept them all working on different steps, a step would take as long as its
  busiest pool, plus the part of the step no pool can overlap, the driver's own serial work
  (``times.other_s``: plans, ingests, publishing weights, logging):
  ``T_sep = max(rollout_busy, teacher_busy, learner_busy) + other``, each the mean over the steps.
  Measured on synchronous steps, each pool's busy time is its time alone, without another pool
  competing for this machine's cores.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.orchestrator import StepMetrics
from services.errors import InputError
from services.operations.pool_load import POOLS, pool_busy_seconds


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all cores, in ``/proc/stat`` ticks."""

    busy: int
    total: int


def cpu_times(proc_stat: str) -> CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat``: idle and iowait count as idle, the rest as busy."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
            idle = ticks[3] + ticks[4]
            return CpuTimes(busy=sum(ticks) - idle, total=sum(ticks))
    raise InputError("no aggregate 'cpu' line in /proc/stat")


def cpu_utilisation(before: CpuTimes, after: CpuTimes) -> float:
    """Share of the CPU time between two readings that was busy."""
    total = after.total - before.total
    return (after.busy - before.busy) / total if total > 0 else 0.0


def steps_per_hour(step_ends: Sequence[float]) -> float:
    """Steps per hour between the completions of the first and the last step (``step_ends``: in order)."""
    if len(step_ends) < 2 or step_ends[-1] <= step_ends[0]:
        raise InputError("steps per hour needs the completion times of two steps or more")
    return 3600.0 * (len(step_ends) - 1) / (step_ends[-1] - step_ends[0])


@dataclass(frozen=True)
class SeparateMachines:
    """The separate-machines model over some steps (seconds, means per step)."""

    busy: dict[str, float]  # each pool's busy time per step
    other_s: float  # the driver's serial part
    step_s: float  # the measured step time (total_s)

    @property
    def model_step_s(self) -> float:
        """T_sep = the busiest pool + the part no pool can overlap."""
        return max(self.busy.values()) + self.other_s

    @property
    def speedup(self) -> float:
        return self.step_s / self.model_step_s if self.model_step_s > 0 else 0.0


def separate_machines(metrics: Sequence[StepMetrics]) -> SeparateMachines:
    """The model from steps that recorded each pool's busy time (synchronous steps, for its assumption)."""
    recorded = [(m, busy) for m in metrics if (busy := pool_busy_seconds(m.times)) is not None]
    if not recorded:
        raise InputError("no step recorded the pools' busy times")
    n = len(recorded)
    return SeparateMachines(
        busy={pool: sum(busy[pool] for _, busy in recorded) / n for pool in POOLS},
        other_s=sum(m.times.other_s for m, _ in recorded) / n,
        step_s=sum(m.times.total_s for m, _ in recorded) / n,
    )
