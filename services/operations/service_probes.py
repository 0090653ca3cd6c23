"""`turnopd status`'s own pings of each service, on top of what the driver published.

The controller and the rollout workers answer small ``health`` calls (a rollout worker answers
beside a running ``play``), the teacher's health is Serve's application status, the env gateway's
is its ``/healthz``; Redis is pinged by the controller. The learner lives inside the driver, so
its health is the driver's word.
"""

import httpx
import ray
from ray import serve
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

from services.contracts.operations import ControllerHealth, RunStatus, ServiceStatus, WorkerHealth
from services.ray_names import CONTROLLER_ACTOR as ACTOR_NAME
from services.ray_names import NAMESPACE, TEACHER_APP

# How a teacher row that scores on a server outside the run starts its detail (no Serve app to ask)
ENDPOINT_DETAIL = "endpoint "


def _actor_call(name: str, method: str, timeout_s: float) -> tuple[object | None, str]:
    """(answer, "") or (None, why not)."""
    try:
        handle = ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None, "no such actor"
    try:
        return ray.get(getattr(handle, method).remote(), timeout=timeout_s), ""
    except ActorUnavailableError:
        return None, "restarting"
    except RayActorError as exc:
        return None, f"dead: {type(exc).__name__}"
    except GetTimeoutError:
        return None, f"no answer in {timeout_s:g} s"


def _unreachable(service: ServiceStatus, why: str) -> ServiceStatus:
    health = "restarting" if why == "restarting" else "down"
    return service.model_copy(update={"health": health, "detail": why})


def probe_controller(
    service: ServiceStatus, timeout_s: float
) -> tuple[ServiceStatus, ControllerHealth | None]:
    answer, why = _actor_call(ACTOR_NAME, "health", timeout_s)
    if not isinstance(answer, ControllerHealth):
        return _unreachable(service, why), None
    return service.model_copy(update={"health": "ok", "detail": controller_detail(answer)}), answer


def controller_detail(health: ControllerHealth) -> str:
    """The controller's row of `turnopd status`: its process, state, and what it rebuilt of what Redis lost."""
    detail = f"pid {health.pid}, state at step {health.step}, H_bar {health.h_bar:.2f}"
    if health.rebuilt_steps:
        detail += f", {health.rebuilt_steps} step(s) Redis lost rebuilt from controller.jsonl"
    return detail


def probe_worker(service: ServiceStatus, timeout_s: float) -> ServiceStatus:
    answer, why = _actor_call(service.name, "health", timeout_s)
    if not isinstance(answer, WorkerHealth):
        return _unreachable(service, why)
    weights = f"weights {answer.weights_version}"
    config = service.version.rpartition("config ")[2]
    return service.model_copy(
        update={
            "health": "busy" if answer.playing else "ok",
            "version": f"{weights}, config {config}" if config else weights,
            "detail": f"pid {answer.pid}, {'playing' if answer.playing else 'idle'}",
        }
    )


def probe_teacher(service: ServiceStatus) -> ServiceStatus:
    """A teacher app's health: the Serve app named as the service (`teacher`, `teacher-<name>`)."""
    app = serve.status().applications.get(service.name)
    if app is None:
        return service.model_copy(update={"health": "down", "detail": f"no Serve app {service.name!r}"})
    replicas = {state: n for d in app.deployments.values() for state, n in d.replica_states.items() if n}
    state = str(getattr(app.status, "value", app.status))  # an enum member in recent Ray
    health = {"RUNNING": "ok", "DEPLOYING": "restarting"}.get(state, "down")
    detail = f"Serve {state}, replicas {replicas}"
    return service.model_copy(update={"health": health, "detail": detail})


def probe_gateway(service: ServiceStatus, timeout_s: float) -> ServiceStatus:
    if service.address is None:
        return service
    try:
        response = httpx.get(f"{service.address}/healthz", timeout=timeout_s)
    except httpx.HTTPError as exc:
        return service.model_copy(update={"health": "down", "detail": f"{type(exc).__name__}"})
    ok = response.status_code == 200
    workers = response.json().get("workers", "?") if ok else "?"
    detail = f"/healthz {response.status_code}, {workers} env worker(s)"
    return service.model_copy(update={"health": "ok" if ok else "down", "detail": detail})


def probe_services(status: RunStatus, timeout_s: float = 5.0) -> RunStatus:
    """``status`` with every service's health replaced by a ping of it now."""
    probed: list[ServiceStatus] = []
    controller: ControllerHealth | None = None
    for service in status.services:
        match service.name:
            case "controller":
                service, controller = probe_controller(service, timeout_s)
            case name if name == TEACHER_APP or name.startswith(f"{TEACHER_APP}-"):
                if not (service.detail or "").startswith(ENDPOINT_DETAIL):
                    service = probe_teacher(service)  # a server outside the run: as the driver saw it
            case "env-gateway":
                service = probe_gateway(service, timeout_s)
            case "learner":
                pass  # inside the driver: its health is what the driver published
            case "redis":
                pass  # pinged below, through the controller
            case name if name.startswith("rollout-worker-"):
                service = probe_worker(service, timeout_s)
        probed.append(service)
    probed = [_redis_health(s, controller) if s.name == "redis" else s for s in probed]
    probed = [_still_restarting(was, now) for was, now in zip(status.services, probed, strict=True)]
    return status.model_copy(update={"services": probed})


def _still_restarting(published: ServiceStatus, probed: ServiceStatus) -> ServiceStatus:
    """A service the driver is restarting stays ``restarting`` when the ping finds it gone: its old
    process may be stopped before the driver publishes the new one's address."""
    if published.health != "restarting" or probed.health not in ("down", "unknown"):
        return probed
    return probed.model_copy(
        update={"health": "restarting", "detail": f"{published.detail}; ping: {probed.detail}"}
    )


def _redis_health(service: ServiceStatus, controller: ControllerHealth | None) -> ServiceStatus:
    if controller is None:
        return service.model_copy(update={"health": "unknown", "detail": "the controller did not answer"})
    if controller.redis_ok:
        return service.model_copy(update={"health": "ok", "detail": f"{service.detail}, answers PING"})
    return service.model_copy(update={"health": "down", "detail": controller.redis_error[:200]})
