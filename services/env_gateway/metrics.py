"""Prometheus metrics of one gateway replica (names prefixed `turnopd_env_`), in their own registry
so several apps in one process (tests, Serve replicas) never collide."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Step latency buckets: the PDDL engine answers in ~10-30 ms, HTTP adds a little.
_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5, 10.0)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.episodes_created = Counter(
            "turnopd_env_episodes_created", "Episodes started.", ["env", "split"], registry=r
        )
        self.episodes_active = Gauge("turnopd_env_episodes_active", "Episodes held now.", registry=r)
        self.episodes_finished = Counter(
            "turnopd_env_episodes_finished", "Episodes that reached done.", ["env", "won"], registry=r
        )
        self.episodes_expired = Counter(
            "turnopd_env_episodes_expired", "Idle episodes closed by the TTL.", registry=r
        )
        self.episodes_lost = Counter(
            "turnopd_env_episodes_lost", "Episodes lost with a dead env worker.", registry=r
        )
        self.steps = Counter("turnopd_env_steps", "Accepted steps.", ["env"], registry=r)
        self.step_latency = Histogram(
            "turnopd_env_step_latency_seconds",
            "Time to play one accepted step (worker round trip included).",
            ["env"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.rejected_actions = Counter(
            "turnopd_env_rejected_actions", "Actions rejected as not admissible.", ["env"], registry=r
        )
        self.worker_restarts = Counter(
            "turnopd_env_worker_restarts", "Env worker processes replaced.", registry=r
        )
        self.workers_alive = Gauge("turnopd_env_workers_alive", "Live env worker processes.", registry=r)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
