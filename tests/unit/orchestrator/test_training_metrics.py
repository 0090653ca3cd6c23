from prometheus_client import CollectorRegistry, generate_latest

from services.contracts.orchestrator import StepMetrics, StepTimes
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.diagnostics.step_stats import step_stats
from services.orchestrator.training_metrics import TrainingMetrics
from services.settings.tree import DiagnosticsSettings


def metrics(step, probe, h_eff=None):
    return StepMetrics(
        step=step, method="turnopd", probe=probe, h_roll=50 if probe else 7, h_hat=7, h_bar=6.4, h_eff=h_eff,
        h_cov=5, h_ctrl=None if h_eff is None else max(h_eff, 5), alpha=step / 10, loss=0.5, mean_kl=0.7,
        grad_norm=1.5, success_rate=0.25, truncated_rate=0.5, mean_turns=3.0, trajectories=4, failed_episodes=1,
        tokens=200, generated_tokens=300, weights_version=step,
        times=StepTimes(rollout_s=3.0, teacher_s=1.0, learner_s=2.0, other_s=0.5, total_s=6.5), cumulative_s=6.5,
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


def test_serve_metrics_releases_its_port_on_exit():
    from contextlib import ExitStack

    import httpx

    from services.orchestrator.training_metrics import serve_metrics

    with ExitStack() as exits:
        port = serve_metrics(CollectorRegistry(), "127.0.0.1", 0, exits)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0).status_code == 200
    # A second run in the same process binds the same port (a fixed [metrics] port across runs).
    with ExitStack() as exits:
        assert serve_metrics(CollectorRegistry(), "127.0.0.1", port, exits) == port
