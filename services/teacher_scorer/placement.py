"""Serve deployment options (replicas, autoscaling, resources, health checks) from the settings."""

from typing import Any

from services.cluster_capacity import actor_resource_options
from services.ray_names import TEACHER_DEPLOYMENT as DEPLOYMENT_NAME
from services.settings.teacher import TeacherSettings


def replica_resources(settings: TeacherSettings) -> dict[str, float]:
    """What one replica reserves, in Ray's resource names."""
    needs = {"CPU": settings.num_cpus, "GPU": settings.num_gpus, **settings.resources}
    return {name: float(amount) for name, amount in needs.items() if amount > 0}


def deployment_options(settings: TeacherSettings) -> dict[str, Any]:
    """Keyword arguments for ``Deployment.options`` of the teacher deployment."""
    options: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        "ray_actor_options": actor_resource_options(replica_resources(settings)),
        "max_ongoing_requests": settings.max_ongoing_requests,
        "health_check_period_s": settings.health_check_period_s,
        "health_check_timeout_s": settings.health_check_timeout_s,
        "max_surge_percent": settings.restart_surge_percent,
    }
    if settings.autoscaling:
        options["autoscaling_config"] = {
            "min_replicas": settings.min_replicas,
            "max_replicas": settings.max_replicas,
            "target_ongoing_requests": settings.target_ongoing_requests,
        }
    else:
        options["num_replicas"] = settings.replicas
    return options
