"""Prometheus metrics of a training run, exported by the `turnopd train` driver.

Controller: ``turnopd_controller_{step,h_eff,h_cov,h_ctrl,h_bar,h_hat,h_roll,alpha,probe}`` and
``turnopd_controller_probes_total``. Learner: ``turnopd_learner_{loss,mean_kl,grad_norm,tokens_per_second,
deep_loss_budget,reliable_prefix}``, ``turnopd_learner_turn_loss_share{turn}`` and
``turnopd_learner_turn_kl{turn}`` for turns of the reliable prefix (labels bounded by ``max_turns``),
``turnopd_step_seconds{phase}``. Rollout pool: ``turnopd_rollout_{success_rate,truncated_rate,
tokens_per_second,failed_episodes_total,episodes_total}``. No per-episode labels.
"""

from contextlib import ExitStack

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from services.contracts.orchestrator import StepMetrics
from services.diagnostics.reliable_prefix import reliable_prefix_length, thirds
from services.diagnostics.step_stats import StepStats
from services.settings.tree import DiagnosticsSettings


class TrainingMetrics:
    def __init__(self, registry: CollectorRegistry, max_turns: int, thresholds: DiagnosticsSettings) -> None:
        self.registry = registry
        self.max_turns = max_turns
        self.thresholds = thresholds
        self._history: list[list[int]] = []

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(f"turnopd_{name}", doc, labels, registry=registry)

        self.controller = {
            key: gauge(f"controller_{key}", doc)
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
        self.probes = Counter("turnopd_controller_probes", "Probe steps so far.", registry=registry)
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
            }.items()
        }
        self.episodes = Counter("turnopd_rollout_episodes", "Episodes played.", registry=registry)
        self.failed = Counter("turnopd_rollout_failed_episodes", "Episodes that failed.", registry=registry)

    def observe(self, m: StepMetrics, stats: StepStats) -> None:
        """Update every metric after step ``m.step``."""
        for key in ("step", "h_bar", "h_hat", "h_roll", "alpha", "h_cov"):
            self.controller[key].set(float(getattr(m, key)))
        for key in ("h_eff", "h_ctrl"):
            value = getattr(m, key)
            if value is not None:
                self.controller[key].set(float(value))
        self.controller["probe"].set(1.0 if m.probe else 0.0)
        if m.probe:
            self.probes.inc()
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
        self.rollout["weights_version"].set(m.weights_version - 1)
        rollout_s = m.times.rollout_s
        self.rollout["tokens_per_second"].set(m.generated_tokens / rollout_s if rollout_s > 0 else 0.0)
        self.episodes.inc(m.trajectories + m.failed_episodes)
        self.failed.inc(m.failed_episodes)


def serve_metrics(registry: CollectorRegistry, host: str, port: int, exits: ExitStack) -> int:
    """Serve ``registry`` on host:port until ``exits`` closes (the socket too); return the bound port."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    exits.callback(server.server_close)  # callbacks run last-in first-out: shut down, then release the port
    exits.callback(server.shutdown)
    return int(server.server_address[1])
