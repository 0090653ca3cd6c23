"""The gateway as a Ray Serve application named `env-gateway`: the same FastAPI app, one worker
pool per replica. Ray is imported here only, so the standalone server never needs it."""

from typing import Any

from ray import serve
from ray.serve import Application

from services.env_gateway.app import create_app
from services.settings.env_gateway import EnvGatewaySettings

SERVE_APP_NAME = "env-gateway"
ROUTE_PREFIX = "/env-gateway"


@serve.ingress()
class EnvGatewayDeployment:
    """One replica: builds the app at replica start; its lifespan starts the env workers."""

    def __init__(self, settings_json: str) -> None:
        self._app = create_app(EnvGatewaySettings.model_validate_json(settings_json))

    def __serve_build_asgi_app__(self) -> Any:
        return self._app

    async def check_health(self) -> None:
        """Serve restarts the replica when this raises: every env worker is gone."""
        runtime = getattr(self._app.state, "runtime", None)
        if runtime is not None and runtime.pool.alive() == 0:
            raise RuntimeError("env gateway replica has no live env worker")


def build_app(settings: EnvGatewaySettings) -> Application:
    """The bound Serve application (deploy with `serve.run(app, name=SERVE_APP_NAME, ...)`)."""
    deployment = serve.deployment(
        name="EnvGateway",
        num_replicas=settings.replicas,
        ray_actor_options={"num_cpus": settings.replica_num_cpus},
        health_check_period_s=5.0,
    )(EnvGatewayDeployment)
    return deployment.bind(settings.model_dump_json())


def deploy(settings: EnvGatewaySettings, blocking: bool = False) -> None:
    """Run the app on the connected Ray cluster under its well-known name and route prefix."""
    serve.run(build_app(settings), name=SERVE_APP_NAME, route_prefix=ROUTE_PREFIX, blocking=blocking)
