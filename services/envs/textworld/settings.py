"""Settings of the TextWorld env: games made offline with `tw-make` (section
``[env_gateway.textworld]``)."""

from pydantic import Field, model_validator

from services.settings_section import Section

DEFAULT_TEXTWORLD_CHALLENGES = ("tw-simple", "tw-cooking", "tw-treasure_hunter")


class TextWorldGenSettings(Section):
    """Games made offline with TextWorld's own challenge generators (`tw-make`)."""

    challenges: list[str] = Field(
        list(DEFAULT_TEXTWORLD_CHALLENGES), min_length=1, description="tw-make challenges (the task types)."
    )
    games_per_challenge_train: int = Field(20, ge=1, le=10_000, description="Train pool size per challenge.")
    games_per_challenge_valid: int = Field(5, ge=1, le=10_000, description="valid_unseen pool per challenge.")
    treasure_hunter_level: int = Field(5, ge=1, le=30, description="tw-treasure_hunter difficulty level.")
    cooking_recipe: int = Field(2, ge=1, le=5, description="tw-cooking: ingredients in the recipe.")
    cooking_go: int = Field(6, description="tw-cooking: number of rooms (1, 6, 9 or 12).")

    @model_validator(mode="after")
    def _known_values(self) -> "TextWorldGenSettings":
        unknown = sorted(set(self.challenges) - set(DEFAULT_TEXTWORLD_CHALLENGES))
        if unknown:
            raise ValueError(f"unknown challenges {unknown}; known: {list(DEFAULT_TEXTWORLD_CHALLENGES)}")
        if self.cooking_go not in (1, 6, 9, 12):
            raise ValueError(f"cooking_go must be 1, 6, 9 or 12, got {self.cooking_go}")
        return self
