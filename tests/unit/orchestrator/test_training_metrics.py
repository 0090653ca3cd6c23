from prometheus_client import CollectorRegistry, generate_latest

from services.contracts.orchestrator import StepMetrics, StepTimes
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.diagnostics.step_stats import step_stats
from services.orchestrator.training_metrics import TrainingMetrics
from services.settings.tree import DiagnosticsSettings


def metrics(step, probe, h_eff=None, times=None, **fields):
    times = times or StepTimes(rollout_s=3.0, teacher_s=1.0, learner_s=2.0, other_s=0.5, total_s=6.5)
    return StepMetrics(**fields,
        step=step, method="turnopd", probe=probe, h_roll=50 if probe else 7, h_hat=7, h_bar=6.4, h_eff=h_eff,
        h_cov=5, h_ctrl=None if h_eff is None else max(h_eff, 5), alpha=step / 10, loss=0.5, mean_kl=0.7,
        grad_norm=1.5, success_rate=0.25, truncated_rate=0.5, mean_turns=3.0, trajectories=4, failed_episodes=1,
        tokens=200, generated_tokens=300, weights_version=step,
        times=times, cumulative_s=6.5,
    )  # fmt: skip


def stats(step):
    trajs = [
        TrajectoryTurnStats(turn_tokens=[5, 5, 5], turn_kl_sum=[2.0, 1.0, 1.0], success=True, truncated=False)
    ] * 4
    return step_stats(TurnStatsRecord(step=step, probe=True, alpha=0.0, h_roll=3, trajectories=trajs), 1, 0.0)


def value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def test_controller_learner_and_rollout_metrics_are_exported():
    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=10, thresholds=DiagnosticsSettings(min_survivors=2))
    tm.observe(metrics(1, True, h_eff=3), stats(1))
    tm.observe(metrics(2, False), stats(2))
    text = generate_latest(registry).decode()
    assert value(text, "turnopd_controller_step") == 2
    assert value(text, "turnopd_controller_h_hat") == 7
    assert value(text, "turnopd_controller_h_roll") == 7
    assert value(text, "turnopd_controller_h_eff") == 3  # kept from the last probe
    assert value(text, "turnopd_controller_probes_total") == 1
    assert value(text, "turnopd_controller_alpha") == 0.2
    assert value(text, "turnopd_learner_reliable_prefix") == 3
    assert value(text, "turnopd_learner_deep_loss_budget") == 0.25  # turn 2: 1.0 of 4.0 KL mass
    assert 'turnopd_learner_turn_loss_share{turn="0"} 0.5' in text
    assert value(text, "turnopd_learner_tokens_per_second") == 100.0
    assert value(text, "turnopd_rollout_tokens_per_second") == 100.0
    assert value(text, "turnopd_rollout_episodes_total") == 10
    assert 'turnopd_step_seconds{phase="rollout"} 3.0' in text


def learner_result(step):
    from services.contracts.learner import LearnerStepResult

    return LearnerStepResult(
        step=step, loss=0.5, mean_kl=0.7, tokens=200, grad_norm=1.5, weights_version=step,
        turn_stats=TurnStatsRecord(step=step, probe=False, alpha=0.0, h_roll=3, trajectories=[
            TrajectoryTurnStats(turn_tokens=[5], turn_kl_sum=[2.0], success=True, truncated=False)
        ]),
        forward_backward_s=1.25, optimizer_s=0.25,
    )  # fmt: skip


class Pool:
    def __init__(self, deaths, replays, reloads, failed):
        self.worker_deaths, self.replays, self.weight_reloads, self.failed_chunks = (
            deaths,
            replays,
            reloads,
            failed,
        )


def test_rollout_counters_learner_split_and_weights_lag():
    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=10, thresholds=DiagnosticsSettings(min_survivors=2))
    tm.observe(metrics(1, True, h_eff=3, rollout_weights_version=0), stats(1), learner=learner_result(1))
    tm.observe(metrics(2, False, rollout_weights_version=1), stats(2), learner=learner_result(2))
    text = generate_latest(registry).decode()
    assert value(text, "turnopd_rollout_turns_total") == 24  # 2 steps x 4 trajectories x 3 turns
    assert value(text, "turnopd_rollout_truncated_episodes_total") == 4  # half of 4, twice
    assert value(text, "turnopd_rollout_generated_tokens_total") == 600
    assert value(text, "turnopd_learner_tokens_total") == 400
    assert value(text, "turnopd_rollout_weights_version") == 1
    assert value(text, "turnopd_rollout_weights_lag") == 0  # synchronous: the weights step 2 updated
    assert 'turnopd_learner_seconds{phase="forward_backward"} 1.25' in text
    assert 'turnopd_learner_seconds{phase="optimizer"} 0.25' in text
    assert value(text, "turnopd_controller_h_bar") == 6.4


def test_pool_events_carry_over_and_survive_a_new_pool():
    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=10, thresholds=DiagnosticsSettings())
    tm.observe_pool(Pool(1, 2, 1, 0), live_workers=4)
    tm.observe_pool(Pool(2, 3, 2, 0), live_workers=3)
    tm.observe_pool(Pool(1, 0, 0, 1), live_workers=4, teacher_replicas=2)  # a replaced pool counts from 0
    text = generate_latest(registry).decode()
    assert value(text, "turnopd_rollout_worker_deaths_total") == 3
    assert value(text, "turnopd_rollout_replays_total") == 3
    assert value(text, "turnopd_rollout_weight_reloads_total") == 2
    assert value(text, "turnopd_rollout_failed_chunks_total") == 1
    assert value(text, "turnopd_rollout_live_workers") == 4
    assert value(text, "turnopd_teacher_replicas") == 2


def test_turn_labels_stay_below_max_turns():
    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=2, thresholds=DiagnosticsSettings(min_survivors=2))
    tm.observe(metrics(1, True, h_eff=3), stats(1))
    turns = {
        s.labels["turn"]
        for family in registry.collect()
        if family.name in ("turnopd_learner_turn_loss_share", "turnopd_learner_turn_kl")
        for s in family.samples
    }
    assert turns == {"0", "1"}  # 3 reliable turns in the data, capped at max_turns=2


def test_pool_busy_ratios_overlap_and_the_weights_lag_histogram():
    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=10, thresholds=DiagnosticsSettings(min_survivors=2))
    busy = StepTimes(
        rollout_s=3.0, teacher_s=1.0, learner_s=2.0, other_s=0.5, total_s=6.5,
        rollout_busy_s=3.25, teacher_busy_s=1.3, learner_busy_s=2.6, overlap_s=0.65,
    )  # fmt: skip
    tm.observe(metrics(1, True, h_eff=3), stats(1))  # an old log line: no busy times, lag from the version
    tm.observe(metrics(2, False, rollout_weights_version=0, times=busy), stats(2))  # one behind
    tm.observe(metrics(3, False, rollout_weights_version=2, times=busy), stats(3))
    text = generate_latest(registry).decode()
    assert 'turnopd_pool_busy_ratio{pool="rollout"} 0.5' in text
    assert 'turnopd_pool_busy_ratio{pool="teacher"} 0.2' in text
    assert 'turnopd_pool_busy_ratio{pool="learner"} 0.4' in text
    assert value(text, "turnopd_pool_overlap_ratio") == 0.1
    assert value(text, "turnopd_rollout_weights_lag") == 0
    assert 'turnopd_step_weights_lag_bucket{le="0.0"} 2.0' in text  # steps 1 and 3
    assert 'turnopd_step_weights_lag_bucket{le="1.0"} 3.0' in text
    assert value(text, "turnopd_step_weights_lag_count") == 3


def test_each_source_of_a_multi_environment_run_has_its_own_controller_series():
    from services.contracts.orchestrator import SourceStepMetrics

    def source(env, h_hat, probe):
        return SourceStepMetrics(
            env=env, probe=probe, h_roll=h_hat, h_hat=h_hat, h_bar=h_hat - 0.5, h_eff=None, h_cov=1, h_ctrl=None,
            alpha=0.1, success_rate=0.0, mean_turns=2.0, trajectories=4, failed_episodes=0,
        )  # fmt: skip

    registry = CollectorRegistry()
    tm = TrainingMetrics(registry, max_turns=10, thresholds=DiagnosticsSettings(min_survivors=2))
    m = metrics(3, True).model_copy(
        update={"sources": [source("alfworld", 30, True), source("search", 4, False)]}
    )
    tm.observe(m, stats(3))
    text = generate_latest(registry).decode()
    assert (
        'turnopd_controller_h_hat{env="alfworld"} 30.0' in text
        and 'turnopd_controller_h_hat{env="search"} 4.0' in text
    )
    assert 'turnopd_controller_step{env="search"} 3.0' in text
    assert (
        'turnopd_controller_probes_total{env="alfworld"} 1.0' in text
        and 'probes_total{env="search"}' not in text
    )
    single = CollectorRegistry()
    TrainingMetrics(single, 10, DiagnosticsSettings(), env="webshop").observe(metrics(1, False), stats(1))
    assert 'turnopd_controller_h_hat{env="webshop"} 7.0' in generate_latest(single).decode()
