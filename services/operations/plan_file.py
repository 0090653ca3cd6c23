"""``DIR/plan.json``: what each service of a run and each part of its driver was handed, resolved
once from the run's settings (secrets masked). Written when the run starts (a resumed one too) and
again after every restart, whose ``--config`` may change a service's piece: what you read there is
what each process runs with now."""

import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from services.durable_files import replace_text
from services.operations.run_services import Services
from services.run_dir import RunDir

PLAN_FILE = "plan.json"


def service_pieces(services: Services) -> dict[str, Any]:
    """Each service's settings object as JSON, by name (a teacher app by its app name)."""
    out: dict[str, Any] = {}
    for service in services.in_start_order():
        name = getattr(service.settings, "app", None) or service.kind
        out[name] = service.settings.model_dump(mode="json")  # SecretStr: "**********"
    return out


def write_plan(run: RunDir, services: Services, driver: Mapping[str, object]) -> None:
    """Write (atomically) the services' pieces and the driver parts' (dataclasses or models)."""
    parts = {name: TypeAdapter(type(piece)).dump_python(piece, mode="json") for name, piece in driver.items()}
    text = json.dumps({"services": service_pieces(services), "driver": parts}, indent=2, sort_keys=True)
    replace_text(run.path(PLAN_FILE), text + "\n")
