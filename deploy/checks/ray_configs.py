"""Validate `ray up` cluster configs with Ray's own schema and checks, and the Serve config with
Ray Serve's own model, all from the installed `ray` package (no cluster, no cloud calls)."""

import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

import click
import jsonschema
import pydantic
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config
from ray.serve.schema import ServeDeploySchema

from deploy.checks.problem import Problem, field_path


@cache
def ray_up_schema() -> dict[str, Any]:
    """``ray/autoscaler/ray-schema.json`` as shipped in the installed Ray."""
    path = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def validate_ray_up_config(where: str, config: dict[str, Any]) -> list[Problem]:
    """Schema errors (each with its path); if none, what Ray's `ray up` preparation rejects."""
    resource = f"ray-up/{config.get('cluster_name', '?')}"
    validator = jsonschema.Draft7Validator(ray_up_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        return [Problem(where, resource, field_path(e.absolute_path), e.message) for e in errors]
    # What `ray up` does before it touches a provider: merge the provider's defaults, fill the
    # node types, then run the same validation the launcher and autoscaler run.
    quiet = logging.getLogger("ray.autoscaler")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # `ray up`'s progress notes are not findings
    try:
        validate_config(prepare_config(config))
    except (
        ValueError,
        RuntimeError,
        AssertionError,
        click.ClickException,
        jsonschema.ValidationError,
    ) as exc:
        message = (
            exc.message if isinstance(exc, (click.ClickException, jsonschema.ValidationError)) else str(exc)
        )
        return [Problem(where, resource, "", f"rejected by ray up: {message}")]
    finally:
        quiet.setLevel(level)
    return []


def validate_serve_config(where: str, config: dict[str, Any]) -> list[Problem]:
    """Validate a Serve config file (`serve deploy` / serveConfigV2) with Ray Serve's schema."""
    try:
        ServeDeploySchema.model_validate(config)
    except pydantic.ValidationError as exc:
        return [Problem(where, "serve-config", field_path(err["loc"]), err["msg"]) for err in exc.errors()]
    return []


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML file holding one mapping."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a YAML mapping, got {type(data).__name__}")
    return data
