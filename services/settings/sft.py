"""Settings of supervised teacher training on expert trajectories (section ``[sft]``)."""

from typing import Literal

from pydantic import Field, model_validator

from services.settings_section import Section

ScheduleKind = Literal["cosine", "linear", "constant"]
SFTEnv = Literal["alfworld", "search", "webshop"]
# the [sft] keys a mix sets per part instead
PART_KEYS = ("env", "episodes", "max_expert_turns")

Autocast = Literal["auto", "off", "bfloat16"]


class SFTPart(Section):
    """One environment of a joint recipe (``[[sft.mix]]``): its expert episodes, and the observation
    format the model learns to read there."""

    env: SFTEnv = Field(description="Env backend the expert plays.")
    episodes: int = Field(ge=1, le=100_000, description="Expert episodes collected on its train split.")
    max_expert_turns: int = Field(
        60, ge=1, le=500, description="Expert episodes longer than this are dropped as failed."
    )
    task_reminder: bool = Field(
        False,
        description="Restate the task in every observation of this env (what [rollout] task_reminder "
        "is to a recipe of one env); a run plays this env in the same format.",
    )


class SFTSettings(Section):
    base: str = Field(
        "teacher", min_length=1, description="Model to start from: zoo name or checkpoint path."
    )
    base_layers: list[int] | None = Field(
        None,
        description="Build the model from these decoder layers of the base, in this order: fewer cut a smaller "
        "model (as DistilBERT's student from every other teacher layer); an index named twice is an independent "
        "copy (depth up-scaling: [0, 1, 2, 1, 2, 3] grows 4 layers to 6, as SOLAR did); unset: all layers.",
    )
    out: str = Field(
        "teacher-sft", min_length=1, description="Zoo name (or path) the trained checkpoint is saved as."
    )
    seed: int = Field(0, ge=0, description="Seed of the expert games, the data order and the run.")
    episodes: int = Field(600, ge=1, le=100_000, description="Expert episodes collected on the train split.")
    env: SFTEnv = Field("alfworld", description="Env backend the expert plays.")
    split: Literal["train"] = Field("train", description="Game pool the expert plays (never valid_unseen).")
    max_expert_turns: int = Field(
        60, ge=1, le=500, description="Expert episodes longer than this are dropped as failed."
    )
    gateway_url: str | None = Field(
        None, description="Env gateway to collect from (unset: start a local one for the collection)."
    )
    detour_rate: float = Field(
        0.15,
        ge=0.0,
        lt=1.0,
        description="Chance per expert turn of a random detour first (recovery demonstrations, household "
        "games only; 0: none).",
    )
    reject_rate: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="Chance per expert turn of a rejected, inadmissible attempt first (rendered with the "
        "agent loop's feedback; never a training target; household games only).",
    )
    false_belief_rate: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Chance per expert turn of a false belief acted on first (an absent object 'seen' and taken, "
        "or a receptacle the room lacks gone to), rejected by the agent loop (never a training target; "
        "household games with thoughts only). Teaches thinking afresh instead of copying the belief.",
    )
    goal_drift_rate: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Chance per expert turn after the first of rendering it with its goal restated wrong in "
        "the thought (another object or destination kind), as context, not a target (household games with "
        "thoughts only). Teaches reading the goal from the task instead of the last thought.",
    )
    collect_concurrency: int = Field(8, ge=1, le=256, description="Expert episodes in flight at once.")
    epochs: float = Field(3.0, gt=0.0, le=1000.0, description="Passes over the expert episodes.")
    batch_episodes: int = Field(
        2, ge=1, le=4096, description="Episodes per optimizer step (small: more updates per epoch)."
    )
    think: bool = Field(
        True,
        description="Each response starts with the expert's thought in <think> (the paper's thinking mode).",
    )
    max_sequence_tokens: int = Field(
        4096, ge=64, description="Longer episodes are cut at the last turn that fits."
    )
    context_loss_weight: float = Field(
        1.0,
        ge=0.0,
        description="Weight of an auxiliary next-token loss on non-response tokens (0: off); it teaches "
        "the tiny model to copy from observations far sooner.",
    )
    context_loss_on_mistakes: bool = Field(
        False,
        description="Also put the context loss on the responses of inserted mistakes (rejected attempts, "
        "false beliefs, drifted turns). Off: they are read, never learned; on: how teacher-recovery and "
        "teacher-stage3 were trained (the model then learns to write the mistakes too).",
    )
    novel_token_weight: float = Field(
        1.0,
        ge=1.0,
        le=100.0,
        description="Loss weight of the response tokens that are new against the response before (the few "
        "that carry a decision: a target newly seen, the next place; the rest are copied); 1: all equal.",
    )
    lr: float = Field(2e-3, gt=0.0, le=1.0, description="Peak AdamW learning rate.")
    min_lr_ratio: float = Field(0.1, ge=0.0, le=1.0, description="Final learning rate as a share of lr.")
    schedule: ScheduleKind = Field("cosine", description="Decay after warm-up: cosine, linear or constant.")
    warmup_frac: float = Field(0.05, ge=0.0, lt=1.0, description="Share of the steps with linear warm-up.")
    weight_decay: float = Field(0.01, ge=0.0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas.")
    grad_clip: float = Field(1.0, gt=0.0, description="Max global gradient norm.")
    autocast: Autocast = Field(
        "auto",
        description="Decoder compute dtype in training. bfloat16: ~1.6x faster on AMX/AVX512-BF16 CPUs, "
        "27x slower on a CPU without them (emulated); auto: bfloat16 only where the hardware has it.",
    )
    length_bucket: int = Field(
        64, ge=1, le=4096, description="Sequences are right-padded to a multiple of this (kernel reuse)."
    )
    threads: int = Field(0, ge=0, le=256, description="Torch CPU threads (0: torch's default).")
    mix: list[SFTPart] = Field(
        default_factory=list,
        description="A joint recipe: one part per env (its own episodes, turn limit and task reminder), "
        "trained on together, the episodes of every part shuffled into one stream; empty: env, episodes and "
        "max_expert_turns here, with [rollout] task_reminder.",
    )
    checkpoint_every: int = Field(
        100,
        ge=0,
        description="Save a resumable state (weights, optimizer, progress) every N optimizer steps beside the "
        "output; `turnopd teacher train` with the same settings continues from it (0: never).",
    )

    @model_validator(mode="after")
    def _base_layers_named(self) -> "SFTSettings":
        layers = self.base_layers
        if layers is not None and (not layers or min(layers) < 0):
            raise ValueError(f"base_layers must name at least one layer index, each >= 0, got {layers}")
        return self

    @model_validator(mode="after")
    def _mix_owns_its_parts(self) -> "SFTSettings":
        if not self.mix:
            return self
        named = [key for key in PART_KEYS if key in self.model_fields_set]
        if named:
            raise ValueError(
                f"with [[sft.mix]] parts, set {', '.join(named)} in each part, not in [sft] "
                "(the --episodes flag too)"
            )
        envs = [part.env for part in self.mix]
        if len(set(envs)) != len(envs):
            raise ValueError(f"each env may have one [[sft.mix]] part, got {envs}")
        return self

    @model_validator(mode="after")
    def _betas_in_range(self) -> "SFTSettings":
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must lie in [0, 1), got {self.betas}")
        return self
