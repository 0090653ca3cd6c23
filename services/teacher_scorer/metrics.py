"""Prometheus metrics of one teacher replica (prefix ``turnopd_teacher_``) and its stats counters.

Each replica keeps its own registry; ``GET /metrics`` answers with the replica that served the
scrape (label ``replica``), so a cluster scrape that reaches every replica sums them.
"""

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from services.contracts.teacher import TeacherReplicaStats
from services.teacher_scorer.scorer import PassReport

PREFIX = "turnopd_teacher_"
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class _Totals:
    requests: int = 0
    in_flight: int = 0
    sequences: int = 0
    scored_positions: int = 0
    batches: int = 0
    max_batch_requests: int = 0
    max_batch_sequences: int = 0
    forward_passes: int = 0
    padded_tokens: int = 0
    input_tokens: int = 0


@dataclass
class TeacherMetrics:
    """Counters and histograms of one replica, plus the same totals as a typed stats record."""

    replica: str
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _totals: _Totals = field(default_factory=_Totals)

    def __post_init__(self) -> None:
        labels = ["replica"]
        r = self.registry
        self._requests = Counter(
            f"{PREFIX}requests", "Scoring requests by outcome.", [*labels, "outcome"], registry=r
        )
        self._positions = Counter(f"{PREFIX}scored_positions", "Positions scored.", labels, registry=r)
        self._input_tokens = Counter(
            f"{PREFIX}input_tokens", "Real tokens run through the teacher.", labels, registry=r
        )
        self._padded_tokens = Counter(
            f"{PREFIX}padded_tokens", "Tokens of padded forward passes (rows x longest).", labels, registry=r
        )
        self._batch_requests = Histogram(
            f"{PREFIX}batch_requests",
            "Distinct requests merged into one batch.",
            labels,
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self._batch_sequences = Histogram(
            f"{PREFIX}batch_sequences", "Sequences in one batch.", labels, buckets=_BATCH_BUCKETS, registry=r
        )
        self._batch_seconds = Histogram(
            f"{PREFIX}batch_seconds",
            "Engine time of one batch.",
            labels,
            buckets=_SECONDS_BUCKETS,
            registry=r,
        )
        self._request_seconds = Histogram(
            f"{PREFIX}request_seconds",
            "Latency of one scoring request, queueing and batching included.",
            labels,
            buckets=_SECONDS_BUCKETS,
            registry=r,
        )
        self._in_flight = Gauge(
            f"{PREFIX}in_flight_requests", "Requests being scored now.", labels, registry=r
        )
        self._healthy = Gauge(
            f"{PREFIX}engine_healthy", "1 while the engine passes health checks.", labels, registry=r
        )
        self._healthy.labels(self.replica).set(1)

    def request_rejected(self) -> None:
        """Count a request that failed validation (it never entered the batch queue)."""
        self._requests.labels(self.replica, "invalid").inc()
        self._totals.requests += 1

    def request_started(self) -> None:
        self._in_flight.labels(self.replica).inc()
        self._totals.in_flight += 1

    def request_finished(
        self, ok: bool, sequences: int = 0, positions: int = 0, seconds: float | None = None
    ) -> None:
        """Count a request that entered the queue; ``ok`` False when the engine failed it."""
        self._in_flight.labels(self.replica).dec()
        if seconds is not None:
            self._request_seconds.labels(self.replica).observe(seconds)
        self._totals.in_flight -= 1
        self._requests.labels(self.replica, "ok" if ok else "failed").inc()
        self._totals.requests += 1
        if ok:
            self._totals.sequences += sequences
            self._totals.scored_positions += positions
            self._positions.labels(self.replica).inc(positions)

    def batch_done(self, n_requests: int, n_sequences: int, report: PassReport, seconds: float) -> None:
        t = self._totals
        t.batches += 1
        t.max_batch_requests = max(t.max_batch_requests, n_requests)
        t.max_batch_sequences = max(t.max_batch_sequences, n_sequences)
        t.forward_passes += report.forward_passes
        t.padded_tokens += report.padded_tokens
        t.input_tokens += report.input_tokens
        self._batch_requests.labels(self.replica).observe(n_requests)
        self._batch_sequences.labels(self.replica).observe(n_sequences)
        self._batch_seconds.labels(self.replica).observe(seconds)
        self._input_tokens.labels(self.replica).inc(report.input_tokens)
        self._padded_tokens.labels(self.replica).inc(report.padded_tokens)

    def set_healthy(self, healthy: bool) -> None:
        self._healthy.labels(self.replica).set(1 if healthy else 0)

    def stats(self) -> TeacherReplicaStats:
        t = self._totals
        return TeacherReplicaStats(replica=self.replica, **t.__dict__)

    def exposition(self) -> bytes:
        """The Prometheus text format of this replica's metrics."""
        return generate_latest(self.registry)
