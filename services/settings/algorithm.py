"""The paper's hyperparameters (its table's names): the loss (``[distill]``), Algorithm 1's depth
controller (``[depth]``), the trajectory-to-turn blend (``[blend]``) and the optimizer (``[optim]``)."""

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from services.settings_section import Section


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
