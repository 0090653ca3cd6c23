"""The one typed settings tree. Keys of the paper's hyperparameter table keep the paper's names.

Every field has a one-line description and bounds; invalid values fail at load time with a
message that names the dotted key (see ``services.settings.loader``).
"""

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from services.contracts.method import Method
from services.settings.cluster import ClusterSettings
from services.settings.controller import ControllerSettings
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.learner import LearnerSettings
from services.settings.metrics import MetricsSettings
from services.settings.models import ModelsSettings
from services.settings.pipeline import PipelineSettings
from services.settings.retrieval_server import RetrievalServerSettings
from services.settings.rollout_worker import RolloutWorkerSettings
from services.settings.security import SecuritySettings
from services.settings.sources import TomlSettings
from services.settings.teacher import TeacherSettings
from services.settings_section import Section
from services.vllm_support.limits import temperature_problem


class RunSettings(Section):
    method: Method = Field("turnopd", description="Training method: full TurnOPD or one of the baselines.")
    seed: int = Field(0, ge=0, description="Seed for task sampling, generation and initialisation.")
    run_dir: Path = Field(Path("runs/latest"), description="Directory for config, metrics, checkpoints.")
    run_id: str | None = Field(None, min_length=1, description="Controller run id (Redis key prefix).")


class DistillSettings(Section):
    distill_topk: int = Field(50, ge=1, description="Teacher top-K support size for the reverse-KL loss.")
    topk_support: Literal["tail", "renorm"] = Field(
        "tail",
        description="Make the top-K support a distribution: 'tail' adds a bucket with the remaining "
        "mass of each side; 'renorm' renormalises both sides over the K ids.",
    )
    clip_ratio: tuple[float, float] = Field(
        (0.9, 9.0),
        description="Importance-ratio clip (low, high): ratio clipped to [1-low, 1+high].",
    )
    REMOVED: ClassVar[dict[str, str]] = {
        "loss_mode": "the objective is always the top-K reverse KL (the paper's only loss mode)",
        "kl_coef": "TurnOPD has no reward-side KL penalty (the paper's kl_coef is 0)",
        "kl_loss_coef": "TurnOPD has no reference-KL loss term (the paper's kl_loss_coef is 0)",
    }

    @model_validator(mode="after")
    def _clip_ratio_in_range(self) -> "DistillSettings":
        low, high = self.clip_ratio
        if not (0.0 <= low < 1.0) or high <= 0.0:
            raise ValueError(f"clip_ratio must be (low in [0, 1), high > 0), got {self.clip_ratio}")
        return self


class DepthSettings(Section):
    REMOVED: ClassVar[dict[str, str]] = {
        "adaptive": "[run] method decides whether the depth is adaptive (turnopd, adaptive-depth) or not",
    }
    coverage_quantile: float = Field(0.8, gt=0.0, le=1.0, description="p for H_cov = Q_p(L_succ).")
    use_success: bool = Field(True, description="H_cov from successful probes (False: all trajectories).")
    min_cov_traj: int = Field(8, ge=1, description="Min trajectories in the CDF source to refresh H_cov.")
    min: int = Field(2, ge=1, description="H_min: lower clamp on the applied depth H_hat.")
    max: int = Field(50, ge=1, description="H_max: upper clamp on H_hat, probe depth, and H_bar_0.")
    ema_alpha: float = Field(0.3, gt=0.0, le=1.0, description="EMA weight on H_ctrl (not the blend alpha).")
    probe_interval: int = Field(8, ge=1, description="Steps between full-depth probes.")
    warmup_steps: int = Field(3, ge=0, description="Probe-only warm-up steps before truncation.")
    eps: float = Field(1e-8, gt=0.0, description="Epsilon in q_t = m_t / (sum_j m_j + eps).")

    @model_validator(mode="after")
    def _min_le_max(self) -> "DepthSettings":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class BlendSettings(Section):
    turn_norm_blend: bool = Field(True, description="Enable the linear trajectory->turn loss blend.")
    start: float = Field(0.0, ge=0.0, le=1.0, description="s: progress where the blend starts.")
    end: float = Field(1.0, ge=0.0, le=1.0, description="e: progress where the blend reaches alpha=1.")
    min_floor: int = Field(8, ge=1, description="Floor term of n_min = max(min_floor, ceil(min_frac*n)).")
    min_frac: float = Field(0.15, ge=0.0, le=1.0, description="Fraction term of n_min.")

    @model_validator(mode="after")
    def _start_before_end(self) -> "BlendSettings":
        if self.end <= self.start:
            raise ValueError(f"end ({self.end}) must be greater than start ({self.start})")
        return self


class OptimSettings(Section):
    lr: float = Field(1e-6, gt=0.0, description="AdamW learning rate.")
    batch: int = Field(64, ge=1, description="Trajectories (tasks x n) per optimizer step.")
    steps: int = Field(100, ge=1, description="K: optimizer steps of the run.")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    grad_clip: float = Field(1.0, gt=0.0, description="Max global gradient norm.")
    mini_batches: int = Field(
        1,
        ge=1,
        description="AdamW updates per step: the step's trajectories split into this many mini-batches "
        "(trajectory i in mini-batch i mod n), each one update, as verl's PPO mini-batches; the importance "
        "ratio clip bounds how far the later ones move from the sampler. 1: one update per step.",
    )

    @model_validator(mode="after")
    def _mini_batches_fit(self) -> "OptimSettings":
        if self.mini_batches > self.batch:
            raise ValueError(
                f"mini_batches ({self.mini_batches}) cannot exceed batch ({self.batch}): a mini-batch "
                "needs at least one trajectory"
            )
        return self


class RolloutSettings(Section):
    env: str = Field("alfworld", min_length=1, description="Env backend the run trains on.")
    task_types: list[str] = Field(
        default_factory=list, description="Task types to sample round-robin (empty: any task type)."
    )
    max_turns: int = Field(80, ge=1, description="Rollout turn cap before adaptive-depth truncation.")
    temperature: float = Field(1.0, gt=0.0, description="Training rollout sampling temperature.")
    n: int = Field(1, ge=1, description="Samples per task in training rollouts.")
    task_reminder: bool = Field(
        False,
        description="End every tool observation with the task restated ('Your task is to: ...'); a "
        "model plays (and SFT renders) in the format it was trained with, recorded in its manifest.",
    )


class EvalSettings(Section):
    interval: int = Field(10, ge=1, description="Evaluate every N optimizer steps (and after the last).")
    at_start: bool = Field(True, description="Also evaluate the starting student before step 1.")
    split: str = Field("valid_unseen", min_length=1, description="Validation split.")
    episodes: int = Field(30, ge=1, description="Validation games per evaluation (task types round-robin).")
    seed: int = Field(
        1234, ge=0, description="Seed choosing the validation games (fixed across evaluations)."
    )
    val_n: int = Field(4, ge=1, description="Samples per validation task (Avg@n).")
    val_temperature: float = Field(
        0.85, ge=0.0, description="Validation sampling temperature; 0 decodes greedily (argmax)."
    )


class DiagnosticsSettings(Section):
    min_survivors: int = Field(
        8, ge=0, description="A turn is supported in a step with >= this many survivors."
    )
    min_survivor_frac: float = Field(0.1, ge=0.0, le=1.0, description="... and >= this fraction of turn 0's.")
    min_step_frac: float = Field(
        0.6, ge=0.0, le=1.0, description="Reliable if supported in >= this share of steps."
    )


# Sections that left the run settings -> where they went. A run config that sets one is an error
# naming that; a run's saved config.json that holds one still reads (``saved_settings``).
MOVED_SECTIONS: dict[str, str] = {
    "sft": "[sft] belongs to a teacher-training recipe, not to a run config: keep it in a file of its "
    "own (as configs/teachers/*.toml) for `turnopd teacher train --config`",
}


class ControllerServiceSettings(BaseModel):
    """All the controller service is given (``TurnOPDSettings.for_controller``): the method, the run
    length, H_max, Algorithm 1's ``[depth]`` and the ``[blend]`` schedule. Every field defines the
    run, so a controller restart keeps them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Method
    steps: int = Field(ge=1)
    max_turns: int = Field(ge=1)
    depth: DepthSettings
    blend: BlendSettings


class RolloutWorkerServiceSettings(BaseModel):
    """All a rollout worker is given (``TurnOPDSettings.for_rollout_worker``): ``[models]`` (engine,
    zoo, response length), the run's seed, ``[rollout_worker]``, the observation format, and the
    service token for the env gateway, resolved once by the driver."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: ModelsSettings
    seed: int
    rollout_worker: RolloutWorkerSettings
    task_reminder: bool
    service_token: SecretStr | None = None


class LearnerServiceSettings(BaseModel):
    """All a learner rank is given (``TurnOPDSettings.for_learner``): the loss (``[distill]``), the
    optimizer and run length (``[optim]``), ``[learner]``, the run's seed and id, and whether its
    rank has a GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    distill: DistillSettings
    optim: OptimSettings
    learner: LearnerSettings
    seed: int
    run_id: str | None
    on_gpu: bool


class TurnOPDSettings(TomlSettings):
    """Root of a run's settings: TOML file values, overridden by ``TURNOPD_SECTION__KEY`` env vars."""

    run: RunSettings = Field(default_factory=RunSettings)
    distill: DistillSettings = Field(default_factory=DistillSettings)
    depth: DepthSettings = Field(default_factory=DepthSettings)
    blend: BlendSettings = Field(default_factory=BlendSettings)
    optim: OptimSettings = Field(default_factory=OptimSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    diagnostics: DiagnosticsSettings = Field(default_factory=DiagnosticsSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    learner: LearnerSettings = Field(default_factory=LearnerSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    teacher: TeacherSettings = Field(default_factory=TeacherSettings)
    env_gateway: EnvGatewaySettings = Field(default_factory=EnvGatewaySettings)
    rollout_worker: RolloutWorkerSettings = Field(default_factory=RolloutWorkerSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    retrieval_server: RetrievalServerSettings = Field(default_factory=RetrievalServerSettings)

    def for_controller(self) -> ControllerServiceSettings:
        """The controller service's own settings, composed from the run's."""
        return ControllerServiceSettings(
            method=self.run.method,
            steps=self.optim.steps,
            max_turns=self.rollout.max_turns,
            depth=self.depth,
            blend=self.blend,
        )

    def for_rollout_worker(self) -> RolloutWorkerServiceSettings:
        """A rollout worker's own settings, composed from the run's."""
        token = self.security.resolved_service_token()
        return RolloutWorkerServiceSettings(
            models=self.models,
            seed=self.run.seed,
            rollout_worker=self.rollout_worker,
            task_reminder=self.rollout.task_reminder,
            service_token=SecretStr(token) if token is not None else None,
        )

    def for_learner(self) -> LearnerServiceSettings:
        """A learner rank's own settings, composed from the run's."""
        return LearnerServiceSettings(
            distill=self.distill,
            optim=self.optim,
            learner=self.learner,
            seed=self.run.seed,
            run_id=self.run.run_id,
            on_gpu=self.cluster.learner_gpus_per_worker > 0,
        )

    @model_validator(mode="before")
    @classmethod
    def _no_moved_section(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in sorted(set(data) & set(MOVED_SECTIONS)):
                raise ValueError(MOVED_SECTIONS[name])
        return data

    @model_validator(mode="after")
    def _within_vllm_limits(self) -> "TurnOPDSettings":
        """What a vLLM engine would refuse or alter fails here, at load, rather than mid-run."""
        if self.models.engine == "vllm":
            for key, value in [
                ("rollout.temperature", self.rollout.temperature),
                ("eval.val_temperature", self.eval.val_temperature),
            ]:
                problem = temperature_problem(value)
                if problem is not None:
                    raise ValueError(f"{key} with models.engine = 'vllm': {problem}")
        if self.teacher.engine == "vllm" and self.distill.distill_topk > self.teacher.vllm_max_logprobs:
            raise ValueError(
                f"distill.distill_topk ({self.distill.distill_topk}) exceeds teacher.vllm_max_logprobs "
                f"({self.teacher.vllm_max_logprobs}), the most log-probs the vLLM teacher returns"
            )
        return self

    @model_validator(mode="after")
    def _one_teacher_pool_size(self) -> "TurnOPDSettings":
        """The teacher pool is sized once. ``[cluster]`` sizes every pool (the deploy checks compare
        it with the manifests); ``[teacher]`` is what the Serve deployment reads. A key set on one
        side is the other's value; set on both sides, they must agree. With ``[cluster]
        pool_resources`` the replicas ask for ``teacher_pool`` unless ``[teacher] resources`` says
        otherwise."""
        cluster, teacher = self.cluster, self.teacher
        for cluster_key, teacher_key in (
            ("teacher_replicas", "replicas"),
            ("teacher_gpus_per_replica", "num_gpus"),
        ):
            pool_value, served = getattr(cluster, cluster_key), getattr(teacher, teacher_key)
            pool_set, served_set = (
                cluster_key in cluster.model_fields_set,
                teacher_key in teacher.model_fields_set,
            )
            if pool_set and served_set and float(pool_value) != float(served):
                raise ValueError(
                    f"cluster.{cluster_key} ({pool_value}) and teacher.{teacher_key} ({served}) disagree; "
                    "set one of them"
                )
            if pool_set and not served_set:
                setattr(teacher, teacher_key, pool_value)
            elif served_set and not pool_set and float(served).is_integer():
                setattr(cluster, cluster_key, int(served))
        if cluster.pool_resources and "resources" not in teacher.model_fields_set:
            teacher.resources = {"teacher_pool": 1.0}
        return self


# Sections a run's config.json may hold from before they left the run settings; dropped on reading.
def saved_settings_dict(text: str) -> dict[str, Any]:
    """A run's saved ``config.json`` as a dict, without the sections that have since moved out."""
    values = json.loads(text)
    return {key: value for key, value in values.items() if key not in MOVED_SECTIONS}


def saved_settings(text: str) -> TurnOPDSettings:
    """The settings a run's ``config.json`` holds (written by any version of TurnOPD since the keys
    it has were added)."""
    return TurnOPDSettings.model_validate_json(json.dumps(saved_settings_dict(text)))
