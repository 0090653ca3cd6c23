"""The gateway as the Ray Serve application `env-gateway`.

`replicas` shards (deployments `EnvShard0..N-1`, one replica each) each run a gateway runtime with
its own env worker pool; the ingress (`EnvGateway`, the same FastAPI app as the standalone server)
routes every request to the shard that owns the episode (`ShardRouter`). Plain Serve replicas of
one deployment would not do: Serve balances requests across replicas, and game state lives in one.
Ray is imported here only, so the standalone server never needs it.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ray import serve
from ray.exceptions import RayTaskError
from ray.serve import Application
from ray.serve.handle import DeploymentHandle

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult
from services.env_gateway.app import create_app
from services.env_gateway.runtime import GatewayRuntime
from services.env_gateway.shard_router import ShardRouter
from services.ray_names import ENV_GATEWAY_APP as SERVE_APP_NAME
from services.serve_config import ServeAppArgs, load_app_args
from services.settings.env_gateway import EnvGatewaySettings

ROUTE_PREFIX = "/env-gateway"


class EnvShard:
    """One shard: a gateway runtime (env worker pool + episodes), called by the ingress."""

    # Serve awaits async constructors; mypy insists __init__ returns None.
    async def __init__(self, settings_json: str, token: str | None) -> None:  # type: ignore[misc]
        self._runtime = GatewayRuntime(EnvGatewaySettings.model_validate_json(settings_json), token)
        await self._runtime.start()

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        return await self._runtime.create(request)

    async def step(self, episode_id: str, action: str) -> StepResult:
        return await self._runtime.step(episode_id, action)

    async def delete(self, episode_id: str) -> None:
        await self._runtime.delete(episode_id)

    async def catalog(self) -> EnvCatalog:
        return await self._runtime.catalog()

    async def health(self) -> Health:
        return await self._runtime.health()

    async def metrics_text(self) -> bytes:
        return await self._runtime.metrics_text()

    async def check_health(self) -> None:
        """Serve restarts the shard when this raises: every env worker is gone."""
        if self._runtime.pool.alive() == 0:
            raise RuntimeError("env gateway shard has no live env worker")


class _ShardHandle:
    """`EpisodeAPI` over a shard's deployment handle; errors come back as the shard raised them."""

    def __init__(self, handle: DeploymentHandle) -> None:
        self._handle = handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self._handle, method).remote(*args)
        except RayTaskError as exc:
            # Ray wraps the shard's exception; the HTTP boundary wants the TurnOPD error itself.
            raise exc.cause from None

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        start: EpisodeStart = await self._call("create", request)
        return start

    async def step(self, episode_id: str, action: str) -> StepResult:
        result: StepResult = await self._call("step", episode_id, action)
        return result

    async def delete(self, episode_id: str) -> None:
        await self._call("delete", episode_id)

    async def catalog(self) -> EnvCatalog:
        catalog: EnvCatalog = await self._call("catalog")
        return catalog

    async def health(self) -> Health:
        health: Health = await self._call("health")
        return health

    async def metrics_text(self) -> bytes:
        text: bytes = await self._call("metrics_text")
        return text


@serve.ingress()
class EnvGatewayIngress:
    """The HTTP face of the app: the gateway's FastAPI app over the shard router."""

    def __init__(self, settings_json: str, token: str | None, *shards: DeploymentHandle) -> None:
        router = ShardRouter([_ShardHandle(handle) for handle in shards])

        @asynccontextmanager
        async def use_router() -> AsyncIterator[ShardRouter]:
            yield router

        settings = EnvGatewaySettings.model_validate_json(settings_json)
        self._app = create_app(settings, episode_api=use_router, token=token)

    def __serve_build_asgi_app__(self) -> Any:
        return self._app


def gateway_application(settings: EnvGatewaySettings, token: str | None = None) -> Application:
    """The bound Serve application (deploy with `serve.run(app, name=SERVE_APP_NAME, ...)`);
    ``token``: the bearer its HTTP routes demand (None: open, for a loopback proxy only), which
    its shards' env workers send to the retrieval and webshop servers."""
    settings_json = settings.model_dump_json()
    shards = [
        serve.deployment(
            name=f"EnvShard{index}",
            num_replicas=1,
            ray_actor_options={"num_cpus": settings.replica_num_cpus},
            health_check_period_s=5.0,
        )(EnvShard).bind(settings_json, token)
        for index in range(settings.replicas)
    ]
    ingress = serve.deployment(name="EnvGateway", ray_actor_options={"num_cpus": 0})(EnvGatewayIngress)
    return ingress.bind(settings_json, token, *shards)


def deploy(settings: EnvGatewaySettings, blocking: bool = False, token: str | None = None) -> None:
    """Run the app on the connected Ray cluster under its well-known name and route prefix."""
    serve.run(
        gateway_application(settings, token),
        name=SERVE_APP_NAME,
        route_prefix=ROUTE_PREFIX,
        blocking=blocking,
    )


class GatewayAppArgs(ServeAppArgs):
    """The Serve config's ``args:`` for ``import_path: services.env_gateway.serve_app:build_app``."""


def build_app(args: dict[str, Any]) -> Application:
    """Serve config builder: ``[env_gateway]`` from ``config_path``; shards = ``[cluster] env_replicas``.

    Serve configs run on clusters, where the proxy listens on every interface: a service token is
    required (``TURNOPD_SERVICE_TOKEN`` or ``[security] service_token``).
    """
    _, settings, token = load_app_args(args, GatewayAppArgs, "env-gateway")
    gateway = settings.env_gateway.model_copy(update={"replicas": settings.cluster.env_replicas})
    return gateway_application(gateway, token)
