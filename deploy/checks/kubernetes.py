"""Validate rendered Kubernetes resources: custom resources against their CRDs' openAPIV3Schema
(KubeRay, Prometheus operator; vendored in deploy/schemas), core kinds with `kubernetes-validate`.

Both are strict, like `kubectl apply --validate=strict`: an unknown field is an error.
"""

import copy
import os
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from deploy.checks.problem import Problem, field_path

KUBERNETES_VERSION = "1.30"
SCHEMAS_ENV = "TURNOPD_SCHEMAS_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]
VENDORED_SCHEMAS = REPO_ROOT / "deploy" / "schemas"

Resource = Mapping[str, Any]


class SchemasMissingError(FileNotFoundError):
    """The CRD schema folder (``$TURNOPD_SCHEMAS_DIR`` or the vendored deploy/schemas) is not there."""


def schemas_root() -> Path:
    """``$TURNOPD_SCHEMAS_DIR`` when set, else the CRDs vendored in ``deploy/schemas`` (see its README)."""
    override = os.environ.get(SCHEMAS_ENV)
    if override:
        root = Path(override)
        hint = f"set by {SCHEMAS_ENV}; unset it to use the vendored deploy/schemas"
    else:
        root = VENDORED_SCHEMAS
        hint = f"the vendored copy; restore deploy/schemas from git or set {SCHEMAS_ENV}"
    if not root.is_dir():
        raise SchemasMissingError(
            f"CRD schemas not found at {root} ({hint}): expected a folder with kuberay/ and "
            "prometheus-operator/ CRD YAML files"
        )
    return root


def strict_schema(schema: Any) -> Any:
    """Copy of an openAPIV3Schema in which objects with declared properties reject unknown keys."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict_schema(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def crd_schemas(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Strict schema per (apiVersion, kind) for every CRD version found under ``root``."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(root.rglob("*.yaml")):
        for crd in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                api_version = f"{spec['group']}/{version['name']}"
                schemas[(api_version, spec["names"]["kind"])] = strict_schema(
                    version["schema"]["openAPIV3Schema"]
                )
    return schemas


def resource_id(resource: Resource) -> str:
    """``Kind/name`` of a resource, for messages."""
    return f"{resource.get('kind', '?')}/{resource.get('metadata', {}).get('name', '?')}"


def _error_problems(where: str, resource: Resource, error: jsonschema.ValidationError) -> list[Problem]:
    base = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        declared = set(error.schema.get("properties", {}))
        unknown = sorted(key for key in error.instance if key not in declared)
        return [
            Problem(where, resource_id(resource), field_path([*base, key]), "unknown field")
            for key in unknown
        ]
    return [Problem(where, resource_id(resource), field_path(base), error.message)]


def validate_custom_resource(where: str, resource: Resource, schema: dict[str, Any]) -> list[Problem]:
    """All schema errors of one custom resource, plus its metadata checked as Kubernetes ObjectMeta."""
    validator = jsonschema.Draft4Validator(schema)
    problems = [
        problem
        for error in sorted(validator.iter_errors(resource), key=lambda e: list(map(str, e.absolute_path)))
        for problem in _error_problems(where, resource, error)
    ]
    # A CRD schema leaves metadata open; the API server checks it as ObjectMeta.
    metadata_only = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": resource.get("metadata", {})}
    return problems + _core_problems(where, resource, metadata_only)


def _core_problems(where: str, resource: Resource, checked: Mapping[str, Any]) -> list[Problem]:
    try:
        kubernetes_validate.validate(copy.deepcopy(dict(checked)), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return _error_problems(where, resource, error)
    except kubernetes_validate.SchemaNotFoundError as error:
        return [Problem(where, resource_id(resource), "", error.message)]
    return []


def is_core_api(api_version: str) -> bool:
    """Kubernetes' own API groups: the core group (``v1``), unqualified groups, ``*.k8s.io``."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def validate_resources(where: str, resources: Iterable[Resource], schema_root: Path) -> list[Problem]:
    """Validate every resource of a render; a kind with no schema at all is a problem too."""
    crds = crd_schemas(schema_root)
    problems: list[Problem] = []
    for resource in resources:
        key = (str(resource.get("apiVersion")), str(resource.get("kind")))
        if key in crds:
            problems += validate_custom_resource(where, resource, crds[key])
        elif is_core_api(key[0]):
            problems += _core_problems(where, resource, resource)
        else:
            problems.append(Problem(where, resource_id(resource), "apiVersion", f"no CRD schema for {key}"))
    return problems
