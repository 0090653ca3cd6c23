"""The teacher replica's Prometheus metrics, read back from its own registry."""

from services.teacher_scorer.metrics import TeacherMetrics
from services.teacher_scorer.scorer import PassReport


def sample(metrics: TeacherMetrics, name: str, **labels: str) -> float | None:
    value = metrics.registry.get_sample_value(name, {"replica": "r0", **labels})
    return value


def test_requests_batches_latency_and_scored_positions():
    m = TeacherMetrics(replica="r0")
    m.request_started()
    m.batch_done(2, 5, PassReport(forward_passes=2, padded_tokens=120, input_tokens=100), seconds=0.04)
    m.request_finished(ok=True, sequences=5, positions=40, seconds=0.3)
    m.request_started()
    m.request_finished(ok=False, seconds=2.0)
    m.request_rejected()
    assert sample(m, "turnopd_teacher_requests_total", outcome="ok") == 1
    assert sample(m, "turnopd_teacher_requests_total", outcome="failed") == 1
    assert sample(m, "turnopd_teacher_requests_total", outcome="invalid") == 1
    assert sample(m, "turnopd_teacher_scored_positions_total") == 40
    assert sample(m, "turnopd_teacher_input_tokens_total") == 100
    assert sample(m, "turnopd_teacher_padded_tokens_total") == 120
    assert sample(m, "turnopd_teacher_batch_sequences_sum") == 5
    assert sample(m, "turnopd_teacher_batch_requests_bucket", le="2.0") == 1
    assert sample(m, "turnopd_teacher_batch_seconds_count") == 1
    assert sample(m, "turnopd_teacher_request_seconds_count") == 2
    assert sample(m, "turnopd_teacher_request_seconds_sum") == 2.3
    assert sample(m, "turnopd_teacher_request_seconds_bucket", le="0.5") == 1
    assert sample(m, "turnopd_teacher_in_flight_requests") == 0
    assert sample(m, "turnopd_teacher_engine_healthy") == 1
    stats = m.stats()
    assert (stats.requests, stats.scored_positions, stats.batches) == (3, 40, 1)
