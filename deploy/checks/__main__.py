"""Run every deployment check offline and print the problems: ``python -m deploy.checks``.

Renders each overlay under k8s/overlays with kustomize, validates all resources against their
schemas, compares pool sizes with the run config, and validates the `ray up` and Serve configs.
Exit status 1 when anything is wrong (one line per problem, with the field path).
"""

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from deploy.checks.consistency import (
    check_images,
    check_ray_version,
    check_references,
    dockerfile_ray_version,
)
from deploy.checks.kubernetes import REPO_ROOT, Resource, schemas_root, validate_resources
from deploy.checks.problem import Problem
from deploy.checks.ray_configs import load_yaml, validate_ray_up_config, validate_serve_config
from deploy.checks.render import render
from deploy.checks.sizing import (
    check_kuberay_sizing,
    check_onprem_sizing,
    check_ray_up_sizing,
    cluster_sizing,
)

OVERLAYS_DIR = REPO_ROOT / "k8s" / "overlays"
RAY_UP_DIR = REPO_ROOT / "deploy" / "ray-up"
SERVE_CONFIG = REPO_ROOT / "deploy" / "serve" / "serve-config.yaml"
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
# `ray up` configs link their run config into place with this setup command.
RUN_CONFIG_LINK = re.compile(r"ln -sfn /etc/turnopd/config/(\S+) /etc/turnopd/turnopd\.toml")


def relative(path: Path) -> str:
    """``path`` relative to the repository, for messages."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def overlay_dirs() -> list[Path]:
    """Every kustomize overlay under k8s/overlays."""
    return sorted(p.parent for p in OVERLAYS_DIR.glob("*/kustomization.yaml"))


def ray_up_configs() -> list[Path]:
    """Every `ray up` cluster config under deploy/ray-up."""
    return sorted(RAY_UP_DIR.glob("*.yaml"))


def check_rendered(where: str, resources: Sequence[Resource], schema_root: Path) -> list[Problem]:
    """All checks of one rendered overlay."""
    ray_version = dockerfile_ray_version(DOCKERFILE.read_text())
    problems = validate_resources(where, resources, schema_root)
    if problems:  # the cross-checks below assume well-formed resources
        return problems
    problems += check_kuberay_sizing(where, resources)
    problems += check_references(where, resources)
    problems += check_images(where, resources)
    problems += check_ray_version(where, resources, ray_version)
    for resource in resources:
        if resource.get("kind") == "RayService":
            serve = yaml.safe_load(resource["spec"]["serveConfigV2"])
            problems += validate_serve_config(f"{where}: RayService/spec.serveConfigV2", serve)
    return problems


def check_overlay(directory: Path, schema_root: Path) -> list[Problem]:
    """Render one overlay and check it."""
    return check_rendered(relative(directory), render(directory), schema_root)


def run_config_of(config: dict[str, Any]) -> Path:
    """The run config a `ray up` config links to /etc/turnopd/turnopd.toml (from deploy/config)."""
    commands = " ".join(config.get("setup_commands", []))
    match = RUN_CONFIG_LINK.search(commands)
    if match is None:
        raise ValueError("setup_commands do not link a run config to /etc/turnopd/turnopd.toml")
    return REPO_ROOT / "deploy" / "config" / match.group(1)


def check_ray_up(path: Path, config: dict[str, Any]) -> list[Problem]:
    """Schema, Ray's own checks, and sizing against the run config it deploys."""
    where = relative(path)
    problems = validate_ray_up_config(where, config)
    if problems:  # sizing assumes a well-formed config
        return problems
    sizing = cluster_sizing(run_config_of(config).read_text())
    if config["provider"]["type"] == "local":
        pool_map = json.loads(path.with_name(f"{path.stem}-pools.json").read_text())
        problems += check_onprem_sizing(where, config, pool_map, sizing)
    else:
        problems += check_ray_up_sizing(where, config, sizing)
    return problems


def run_all() -> tuple[int, list[Problem]]:
    """(number of files and overlays checked, problems) over the whole deployment."""
    schema_root = schemas_root()
    problems: list[Problem] = []
    overlays, configs = overlay_dirs(), ray_up_configs()
    for directory in overlays:
        problems += check_overlay(directory, schema_root)
    for path in configs:
        problems += check_ray_up(path, load_yaml(path))
    problems += validate_serve_config(relative(SERVE_CONFIG), load_yaml(SERVE_CONFIG))
    return len(overlays) + len(configs) + 1, problems


def main() -> int:
    """CLI entry: print problems, or a one-line summary."""
    checked, problems = run_all()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {checked} overlays/configs", file=sys.stderr)
        return 1
    print(f"ok: {checked} overlays/configs valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
