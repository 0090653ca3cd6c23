"""`turnopd serve teacher`: the teacher app on a local (or RAY_ADDRESS) Ray cluster via ``serve.run``.

The standalone server is the same Serve application as on a cluster (batching, metrics, health
checks and replica replacement included), not a separate uvicorn path.
"""

import time

import ray
from ray import serve
from rich.console import Console

from services.ray_names import TEACHER_APP as APP_NAME
from services.ray_session import ensure_ray
from services.serve_config import check_serve_proxy
from services.service_auth import check_bind
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.engine import checkpoint_dir
from services.teacher_scorer.serve_app import teacher_application


def serve_teacher(settings: TurnOPDSettings, console: Console) -> None:
    """Start Ray and Serve, deploy the teacher, and block until interrupted; Serve is shut down on exit."""
    teacher = settings.teacher
    checkpoint_dir(teacher.model)  # fail here, not inside a replica
    token = settings.security.resolved_service_token()
    check_bind(teacher.host, token, "teacher")
    with console.status("starting Ray"):
        ensure_ray(teacher.num_cpus * max(teacher.replicas, teacher.min_replicas))
    try:
        with console.status(f"deploying the teacher app ({teacher.engine}, {teacher.model})"):
            serve.start(http_options={"host": teacher.host, "port": teacher.port})
            check_serve_proxy(token, APP_NAME)  # a Serve already running keeps its own proxy host
            serve.run(
                teacher_application(teacher, settings.distill.distill_topk, token),
                name=APP_NAME,
                route_prefix=teacher.route_prefix,
            )
        base = f"http://{teacher.host}:{teacher.port}{teacher.route_prefix.rstrip('/')}"
        console.print(f"teacher ready: POST {base}/v1/score, GET {base}/healthz, GET {base}/metrics")
        console.print("Ctrl-C stops it")
        while True:
            time.sleep(3600)
    finally:
        serve.shutdown()
        ray.shutdown()
