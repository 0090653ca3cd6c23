"""The gateway replica's Prometheus exposition, parsed back (names, labels, values)."""

from prometheus_client.parser import text_string_to_metric_families

from services.env_gateway.metrics import GatewayMetrics


def samples(m: GatewayMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(m.render().decode())
        for s in family.samples
    }


def test_exposition_values():
    m = GatewayMetrics()
    m.episodes_created.labels("alfworld", "train").inc(3)
    m.episodes_active.set(2)
    m.episodes_finished.labels("alfworld", "true").inc()
    m.steps.labels("alfworld").inc(5)
    m.step_latency.labels("alfworld").observe(0.015)
    m.step_latency.labels("alfworld").observe(0.3)
    m.rejected_actions.labels("alfworld").inc()
    m.worker_restarts.inc()
    m.workers_alive.set(4)
    got = samples(m)
    env = (("env", "alfworld"),)
    assert got[("turnopd_env_episodes_created_total", (("env", "alfworld"), ("split", "train")))] == 3
    assert got[("turnopd_env_episodes_active", ())] == 2
    assert got[("turnopd_env_episodes_finished_total", (("env", "alfworld"), ("won", "true")))] == 1
    assert got[("turnopd_env_steps_total", env)] == 5
    assert got[("turnopd_env_step_latency_seconds_count", env)] == 2
    assert got[("turnopd_env_step_latency_seconds_bucket", (("env", "alfworld"), ("le", "0.02")))] == 1
    assert got[("turnopd_env_step_latency_seconds_bucket", (("env", "alfworld"), ("le", "0.5")))] == 2
    assert got[("turnopd_env_rejected_actions_total", env)] == 1
    assert got[("turnopd_env_worker_restarts_total", ())] == 1
    assert got[("turnopd_env_workers_alive", ())] == 4
    assert {name for name, _ in got if not name.startswith("turnopd_env_")} == set()
