"""What the step loop and its parts read of the settings, resolved once when a run starts (and
again on a resume): each part is handed its own frozen piece, never the whole tree."""

from dataclasses import dataclass

from services.settings.tree import TurnOPDSettings


@dataclass(frozen=True)
class EvalSchedule:
    """When the run evaluates: every ``interval`` steps and after the last one; step 0 (before
    training) if ``at_start``."""

    interval: int
    last_step: int
    at_start: bool

    def due(self, step: int) -> bool:
        """Whether the schedule evaluates after ``step``."""
        if step == 0:
            return self.at_start
        return step % self.interval == 0 or step == self.last_step


@dataclass(frozen=True)
class PlaySettings:
    """The dispatcher's piece: how a step's tasks are played and scored."""

    temperature: float
    top_k: int
    stream_teacher: bool
    max_new_tokens: int  # named in the reason of a trajectory without a response
    max_infra_failure_frac: float  # [rollout]: above it a step stops the run


@dataclass(frozen=True)
class LoopSettings:
    """The step loop's piece."""

    steps: int  # the last step
    staleness: int  # [pipeline] max_staleness
    method: str
    multi_source: bool  # [[sources]] set: metrics list every source's fields
    evals: EvalSchedule
    play: PlaySettings

    @classmethod
    def of(cls, settings: TurnOPDSettings) -> "LoopSettings":
        return cls(
            steps=settings.optim.steps,
            staleness=settings.pipeline.max_staleness,
            method=settings.run.method,
            multi_source=bool(settings.sources),
            evals=EvalSchedule(settings.eval.interval, settings.optim.steps, settings.eval.at_start),
            play=PlaySettings(
                temperature=settings.rollout.temperature,
                top_k=settings.distill.distill_topk,
                stream_teacher=settings.pipeline.stream_teacher,
                max_new_tokens=settings.models.max_new_tokens,
                max_infra_failure_frac=settings.rollout.max_infra_failure_frac,
            ),
        )
