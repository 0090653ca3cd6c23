"""Settings of the env gateway service (section ``[env_gateway]``)."""

import os
from pathlib import Path

from pydantic import Field

from services.cache_dir import resolve_cache_dir
from services.envs.alfworld.settings import HouseholdGenSettings
from services.envs.search.settings import SearchEnvSettings
from services.envs.textworld.settings import TextWorldGenSettings
from services.envs.webshop.settings import WebShopSettings
from services.settings_section import Section

# The variable that named an external gateway before ``[env_gateway] url`` existed (still read).
GATEWAY_URL_ENV = "TURNOPD_ENV_GATEWAY_URL"


class EnvGatewaySettings(Section):
    url: str | None = Field(
        None,
        description="An env gateway already running, which `turnopd train` uses instead of starting its "
        "own (default: $TURNOPD_ENV_GATEWAY_URL; unset: a local gateway on `port`).",
    )
    host: str = Field("127.0.0.1", min_length=1, description="Bind address of the standalone server.")
    port: int = Field(
        8100,
        ge=0,
        le=65535,
        description="Port of the standalone server and of `turnopd train`'s (0: any free).",
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        le=1 << 31,
        description="Largest request body in bytes, refused unread beyond (413).",
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

    def resolved_url(self) -> str | None:
        """The external gateway: this setting, else $TURNOPD_ENV_GATEWAY_URL read now; None: start one."""
        return self.url or os.environ.get(GATEWAY_URL_ENV) or None

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
