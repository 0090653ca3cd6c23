"""Settings of the training step's pipeline: which of its phases may overlap."""

from pydantic import Field

from services.settings_section import Section


class PipelineSettings(Section):
    max_staleness: int = Field(
        0,
        ge=0,
        le=8,
        description="s: how many weights versions a step's rollouts may lag behind the learner (the "
        "rollouts of steps k+1..k+s playing while the learner trains step k; step k planned from the "
        "controller state after step k-1-s). 0 is the synchronous on-policy step, the paper's protocol.",
    )
    stream_teacher: bool = Field(
        False,
        description="Score each finished rollout chunk with the teacher while the step's other chunks "
        "still play; the learner gets the same batch, with the same scores, as without.",
    )
