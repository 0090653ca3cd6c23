"""Settings of the household (ALFWorld) env: the offline game generator (section
``[env_gateway.household]``)."""

from pydantic import Field

from services.settings_section import Section


class HouseholdGenSettings(Section):
    """Offline household games (ALFWorld domain + scene layouts) when no ALFWorld data is given."""

    games_per_task_type_train: int = Field(
        100, ge=1, le=100_000, description="Train pool size per task type."
    )
    games_per_task_type_valid: int = Field(
        20, ge=1, le=100_000, description="valid_unseen pool per task type."
    )
    max_receptacles: int = Field(
        8, ge=4, le=40, description="Receptacles per room (search length, observation size)."
    )
    max_distractors: int = Field(6, ge=0, le=30, description="Non-target objects per room.")
    max_targets: int = Field(
        2, ge=1, le=4, description="Instances of the target object (pick_two: at least 2)."
    )
