"""Settings of the env gateway service (section ``[env_gateway]``)."""

import os
from pathlib import Path

from pydantic import Field, model_validator

from services.cache_dir import resolve_cache_dir
from services.settings.search_env import SearchEnvSettings
from services.settings.section import Section
from services.settings.webshop import WebShopSettings

DEFAULT_TEXTWORLD_CHALLENGES = ("tw-simple", "tw-cooking", "tw-treasure_hunter")


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


class EnvGatewaySettings(Section):
    host: str = Field("127.0.0.1", min_length=1, description="Bind address of the standalone server.")
    port: int = Field(
        8100,
        ge=0,
        le=65535,
        description="Port of the standalone server and of `turnopd train`'s (0: any free).",
    )
    replicas: int = Field(1, ge=1, le=256, description="Ray Serve replicas of the `env-gateway` app.")
    replica_num_cpus: float = Field(1.0, ge=0.0, description="CPUs Ray reserves per Serve replica.")
    workers: int = Field(2, ge=1, le=256, description="Env worker processes per replica.")
    max_episodes_per_worker: int = Field(64, ge=1, le=4096, description="Episodes one worker may host.")
    episode_ttl_s: float = Field(
        900.0, gt=0.0, description="Idle episodes are closed after this many seconds."
    )
    call_timeout_s: float = Field(
        120.0, gt=0.0, description="A worker call slower than this kills and replaces the worker."
    )
    cache_dir: Path | None = Field(
        None, description="Generated-game cache (default: $TURNOPD_CACHE_DIR/envs or ~/.cache/turnopd/envs)."
    )
    alfworld_data: Path | None = Field(
        None, description="Real ALFWorld game files (default: $ALFWORLD_DATA; unset: generate games offline)."
    )
    household: HouseholdGenSettings = Field(default_factory=HouseholdGenSettings)
    textworld: TextWorldGenSettings = Field(default_factory=TextWorldGenSettings)
    search: SearchEnvSettings = Field(default_factory=SearchEnvSettings)
    webshop: WebShopSettings = Field(default_factory=WebShopSettings)

    def resolved_cache_dir(self) -> Path:
        """The game cache directory, read from the environment at call time (never at import)."""
        if self.cache_dir is not None:
            return self.cache_dir.expanduser()
        return resolve_cache_dir() / "envs"

    def resolved_alfworld_data(self) -> Path | None:
        """The real ALFWorld data directory: this setting, else $ALFWORLD_DATA if it holds the games.

        `import alfworld` itself points $ALFWORLD_DATA at an empty default directory, so the
        variable counts only when ALFWorld's download layout (`json_2.1.1/`) is there.
        """
        if self.alfworld_data is not None:
            return self.alfworld_data.expanduser()
        root = os.environ.get("ALFWORLD_DATA")
        if root and (Path(root).expanduser() / "json_2.1.1").is_dir():
            return Path(root).expanduser()
        return None
