"""Prometheus metrics of a training run, exported by the `turnopd train` driver.

The driver serves them (``[metrics]``, ``MetricsExporter``) because every value is a step-level
outcome it already holds: the controller's decision, the learner's merged step result, the
rollout pool's merged result and its recovery counters (the pool object lives in the driver).

Controller, labelled with the task source's ``env`` (one series per source of a multi-environment
run): ``turnopd_controller_{step,h_eff,h_cov,h_ctrl,h_bar,h_hat,h_roll,alpha,probe}{env}`` and
``turnopd_controller_probes_total{env}``. Learner: ``turnopd_learner_{loss,mean_kl,grad_norm,tokens_per_second,
deep_loss_budget,reliable_prefix}``, ``turnopd_learner_turn_loss_share{turn}`` and
``turnopd_learner_turn_kl{turn}`` for turns of the reliable prefix (labels bounded by ``max_turns``),
``turnopd_learner_seconds{phase}``, ``turnopd_learner_tokens_total``, ``turnopd_step_seconds{phase}``.
Pools: ``turnopd_pool_busy_ratio{pool}`` (rollout, teacher, learner: share of the last step's wall
time each was busy) and ``turnopd_pool_overlap_ratio`` (share with two or more busy at once);
``turnopd_step_weights_lag`` (histogram over steps: versions the rollouts' weights were behind the
weights the step updated, 0 on-policy). Rollout pool: ``turnopd_rollout_{success_rate,truncated_rate,tokens_per_second,weights_version,
weights_lag,live_workers}`` and the counters ``turnopd_rollout_{episodes,failed_episodes,turns,
truncated_episodes,generated_tokens,worker_deaths,replays,weight_reloads,failed_chunks}_total``.
No per-episode labels.
"""

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.contracts.learner import LearnerStepResult
from services.contracts.orchestrator import SourceStepMetrics, StepMetrics
from services.diagnostics.reliable_prefix import reliable_prefix_length, thirds
from services.diagnostics.step_stats import StepStats
from services.operations.pool_load import POOLS, pool_load
from services.settings.tree import DiagnosticsSettings


class PoolStatsLike(Protocol):
    """The rollout pool's cumulative recovery counters (``services.rollout_worker.pool.PoolStats``)."""

    worker_deaths: int
    replays: int
    weight_reloads: int
    failed_chunks: int


POOL_EVENTS = ("worker_deaths", "replays", "weight_reloads", "failed_chunks")
WEIGHTS_LAG_BUCKETS = (0, 1, 2, 3, 4, 8)


class TrainingMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        max_turns: int,
        thresholds: DiagnosticsSettings,
        env: str = "alfworld",
    ) -> None:
        self.registry = registry
        self.env = env  # the ``env`` label of a single-source run's controller series
        self.max_turns = max_turns
        self.thresholds = thresholds
        self._history: list[list[int]] = []

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(f"turnopd_{name}", doc, labels, registry=registry)

        self.controller = {
            key: gauge(f"controller_{key}", doc, ("env",))
            for key, doc in {
                "step": "Last completed optimizer step k.",
                "h_eff": "Efficiency centroid H_eff of the last probe (0-based turn).",
                "h_cov": "Coverage bound H_cov (0-based turn).",
                "h_ctrl": "H_ctrl = max(H_eff, H_cov) of the last probe.",
                "h_bar": "EMA horizon H_bar.",
                "h_hat": "Applied depth H_hat of the step.",
                "h_roll": "Turns collected at the step (H_max on probes).",
                "alpha": "Loss blend coefficient of the step.",
                "probe": "1 when the step was a full-depth probe.",
            }.items()
        }
        self.probes = Counter("turnopd_controller_probes", "Probe steps so far.", ("env",), registry=registry)
        self.learner = {
            key: gauge(f"learner_{key}", doc)
            for key, doc in {
                "loss": "Weighted top-K reverse-KL loss of the step.",
                "mean_kl": "Token-mean top-K reverse KL of the step.",
                "grad_norm": "Global gradient norm before clipping.",
                "tokens_per_second": "Supervised tokens per second of learner time.",
                "deep_loss_budget": "Deep third's share of trajectory-level loss mass at the step.",
                "reliable_prefix": "Reliable turn prefix R over the run so far.",
            }.items()
        }
        self.turn_share = gauge("learner_turn_loss_share", "Loss share of a reliable-prefix turn.", ("turn",))
        self.turn_kl = gauge("learner_turn_kl", "Raw KL K_t of a reliable-prefix turn.", ("turn",))
        self.step_seconds = gauge("step_seconds", "Wall time of the last step by phase.", ("phase",))
        self.rollout = {
            key: gauge(f"rollout_{key}", doc)
            for key, doc in {
                "success_rate": "Share of the step's trajectories that succeeded.",
                "truncated_rate": "Share of the step's trajectories cut by H_roll.",
                "tokens_per_second": "Generated tokens per second of rollout time.",
                "weights_version": "Weights version the step's rollouts used.",
                "weights_lag": "Versions the rollouts' weights were behind the weights the step updated (0: on-policy).",
                "live_workers": "Rollout workers the pool still dispatches to.",
            }.items()
        }

        def counter(name: str, doc: str) -> Counter:
            return Counter(f"turnopd_{name}", doc, registry=registry)

        self.teacher_replicas = gauge(
            "teacher_replicas", "Teacher Serve replicas asked for (`turnopd scale teacher`); 0: autoscaling."
        )
        self.episodes = counter("rollout_episodes", "Episodes played.")
        self.failed = counter("rollout_failed_episodes", "Episodes that failed.")
        self.turns = counter("rollout_turns", "Turns played in training rollouts.")
        self.truncated = counter("rollout_truncated_episodes", "Training episodes cut by H_roll.")
        self.generated = counter("rollout_generated_tokens", "Tokens sampled by the rollout workers.")
        self.learner_tokens = counter("learner_tokens", "Supervised tokens the learner trained on.")
        self.learner_seconds = gauge("learner_seconds", "Learner time of the last step by phase.", ("phase",))
        self.pool_busy = gauge(
            "pool_busy_ratio", "Share of the last step's wall time the pool was busy.", ("pool",)
        )
        self.pool_overlap = gauge(
            "pool_overlap_ratio", "Share of the last step's wall time two or more pools were busy at once."
        )
        self.weights_lag = Histogram(
            "turnopd_step_weights_lag",
            "Versions a step's rollout weights were behind the weights it updated (0: on-policy).",
            buckets=WEIGHTS_LAG_BUCKETS,
            registry=registry,
        )
        self.pool_events = {
            key: counter(f"rollout_{key}", doc)
            for key, doc in {
                "worker_deaths": "Rollout workers that died mid-call (Ray restarts them).",
                "replays": "Chunks of episodes played again after a death or stale weights.",
                "weight_reloads": "Restarted workers brought back to the published weights.",
                "failed_chunks": "Chunks given up after max_attempts.",
            }.items()
        }
        self._pool_seen = dict.fromkeys(POOL_EVENTS, 0)

    def observe(
        self,
        m: StepMetrics,
        stats: StepStats,
        learner: LearnerStepResult | None = None,
    ) -> None:
        """Update every metric after step ``m.step`` (``learner``: its time split)."""
        parts: list[tuple[str, StepMetrics | SourceStepMetrics]] = (
            [(s.env, s) for s in m.sources] if m.sources else [(self.env, m)]
        )
        for env, part in parts:
            self.controller["step"].labels(env=env).set(float(m.step))
            for key in ("h_bar", "h_hat", "h_roll", "alpha", "h_cov"):
                self.controller[key].labels(env=env).set(float(getattr(part, key)))
            for key in ("h_eff", "h_ctrl"):
                value = getattr(part, key)
                if value is not None:
                    self.controller[key].labels(env=env).set(float(value))
            self.controller["probe"].labels(env=env).set(1.0 if part.probe else 0.0)
            if part.probe:
                self.probes.labels(env=env).inc()
        self.learner["loss"].set(m.loss)
        self.learner["mean_kl"].set(m.mean_kl)
        self.learner["grad_norm"].set(m.grad_norm)
        self.learner["tokens_per_second"].set(m.tokens / m.times.learner_s if m.times.learner_s > 0 else 0.0)
        self._history.append(stats.survivors)
        t = self.thresholds
        prefix = min(
            reliable_prefix_length(self._history, t.min_survivors, t.min_survivor_frac, t.min_step_frac),
            self.max_turns,
        )
        self.learner["reliable_prefix"].set(prefix)
        _, deep = thirds(prefix)
        self.learner["deep_loss_budget"].set(sum(stats.share_traj[i] for i in deep if i < stats.depth))
        self.turn_share.clear()
        self.turn_kl.clear()
        for turn in range(min(prefix, stats.depth)):
            self.turn_share.labels(turn=str(turn)).set(stats.share_actual[turn])
            kl = stats.kl[turn]
            if kl is not None:
                self.turn_kl.labels(turn=str(turn)).set(kl)
        for phase in ("rollout_s", "teacher_s", "learner_s", "other_s", "total_s"):
            self.step_seconds.labels(phase=phase.removesuffix("_s")).set(getattr(m.times, phase))
        self.rollout["success_rate"].set(m.success_rate)
        self.rollout["truncated_rate"].set(m.truncated_rate)
        used = m.weights_version - 1 if m.rollout_weights_version is None else m.rollout_weights_version
        lag = m.weights_version - 1 - used
        self.rollout["weights_version"].set(used)
        self.rollout["weights_lag"].set(lag)
        self.weights_lag.observe(lag)
        load = pool_load([m.times])
        if load is not None:
            for pool in POOLS:
                self.pool_busy.labels(pool=pool).set(load.busy[pool])
            self.pool_overlap.set(load.overlap)
        rollout_s = m.times.rollout_s
        self.rollout["tokens_per_second"].set(m.generated_tokens / rollout_s if rollout_s > 0 else 0.0)
        self.episodes.inc(m.trajectories + m.failed_episodes)
        self.failed.inc(m.failed_episodes)
        self.turns.inc(round(m.mean_turns * m.trajectories))
        self.truncated.inc(round(m.truncated_rate * m.trajectories))
        self.generated.inc(m.generated_tokens)
        self.learner_tokens.inc(m.tokens)
        if learner is not None:
            self.learner_seconds.labels(phase="forward_backward").set(learner.forward_backward_s)
            self.learner_seconds.labels(phase="optimizer").set(learner.optimizer_s)

    def observe_pool(self, stats: PoolStatsLike, live_workers: int, teacher_replicas: int = 0) -> None:
        """Carry the pool's cumulative recovery counters over (a new pool starts its own from 0), and
        the pools' sizes."""
        for key in POOL_EVENTS:
            now = int(getattr(stats, key))
            seen = self._pool_seen[key]
            self.pool_events[key].inc(now - seen if now >= seen else now)
            self._pool_seen[key] = now
        self.rollout["live_workers"].set(live_workers)
        self.teacher_replicas.set(teacher_replicas)
