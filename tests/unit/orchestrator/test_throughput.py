import pytest

from services.contracts.orchestrator import StepMetrics, StepTimes
from services.errors import InputError
from services.orchestrator.throughput import (
    CpuTimes,
    cpu_times,
    cpu_utilisation,
    separate_machines,
    steps_per_hour,
)

PROC_STAT = """cpu  100 5 50 800 45 0 0 0 0 0
cpu0 50 2 25 400 23 0 0 0 0 0
intr 12345
"""


def test_cpu_time_from_proc_stat_and_the_busy_share_between_two_readings():
    assert cpu_times(PROC_STAT) == CpuTimes(busy=155, total=1000)
    assert cpu_utilisation(CpuTimes(155, 1000), CpuTimes(155 + 190, 1000 + 200)) == pytest.approx(0.95)
    assert cpu_utilisation(CpuTimes(1, 1), CpuTimes(1, 1)) == 0.0
    with pytest.raises(InputError, match="no aggregate 'cpu' line"):
        cpu_times("cpu0 1 2 3 4 5 6 7 8\n")


def test_steps_per_hour_leave_out_the_first_step():
    assert steps_per_hour([100.0, 112.0, 124.0, 136.0]) == pytest.approx(300.0)  # 3 steps in 36 s
    with pytest.raises(InputError):
        steps_per_hour([5.0])


def step(k, rollout, teacher, learner, other):
    times = StepTimes(
        rollout_s=rollout, teacher_s=teacher, learner_s=learner, other_s=other,
        total_s=rollout + teacher + learner + other, rollout_busy_s=rollout, teacher_busy_s=teacher,
        learner_busy_s=learner, overlap_s=0.0,
    )  # fmt: skip
    return StepMetrics(
        step=k, method="turnopd", probe=False, h_roll=4, h_hat=4, h_bar=3.0, h_eff=None, h_cov=1, h_ctrl=None,
        alpha=0.0, loss=0.1, mean_kl=0.1, grad_norm=1.0, success_rate=0.5, truncated_rate=0.0, mean_turns=2.0,
        trajectories=4, failed_episodes=0, tokens=10, generated_tokens=20, weights_version=k, times=times,
        cumulative_s=0.0,
    )  # fmt: skip


def test_separate_machines_take_the_busiest_pool_plus_the_serial_part():
    model = separate_machines([step(1, 40.0, 20.0, 36.0, 4.0), step(2, 36.0, 18.0, 44.0, 2.0)])
    assert model.busy == {"rollout": 38.0, "teacher": 19.0, "learner": 40.0}
    assert (model.other_s, model.step_s) == (3.0, 100.0)
    assert model.model_step_s == 43.0  # the learner, plus 3 s of plans, ingests and publishing
    assert model.speedup == pytest.approx(100.0 / 43.0)
    old = step(3, 1.0, 1.0, 1.0, 1.0)
    with pytest.raises(InputError, match="no step recorded"):
        separate_machines(
            [old.model_copy(update={"times": old.times.model_copy(update={"overlap_s": None})})]
        )
