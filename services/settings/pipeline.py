"""Settings of the training step's pipeline: which of its phases may overlap."""

from pydantic import Field, field_validator

from services.settings.section import Section


class PipelineSettings(Section):
    max_staleness: int = Field(
        0,
        ge=0,
        description="s: how many weights versions a step's rollouts may lag behind the learner (the "
        "rollouts of steps k+1..k+s playing while the learner trains step k). 0 is the synchronous "
        "on-policy step, the paper's protocol; only 0 is available so far.",
    )
    stream_teacher: bool = Field(
        False,
        description="Score each finished rollout chunk with the teacher while the step's other chunks "
        "still play; the learner gets the same batch, with the same scores, as without.",
    )

    @field_validator("max_staleness")
    @classmethod
    def _available(cls, value: int) -> int:
        if value > 0:
            raise ValueError(
                "rollouts overlapped with the learner (s >= 1) are not available yet; 0 is the synchronous step"
            )
        return value
