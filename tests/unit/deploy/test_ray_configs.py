"""`ray up` configs validate against Ray's ray-schema.json and Ray's own checks; the Serve config
against Ray Serve's schema; the on-prem pool script prints a host's pool resources."""

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from deploy.checks.__main__ import RAY_UP_DIR, SERVE_CONFIG
from deploy.checks.ray_configs import load_yaml, validate_ray_up_config, validate_serve_config


def load_pool_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pool_resources", RAY_UP_DIR / "pool_resources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["aws-gpu.yaml", "onprem.yaml"])
def test_ray_up_config_validates(name: str) -> None:
    assert validate_ray_up_config(name, load_yaml(RAY_UP_DIR / name)) == []


def test_ray_up_configs_found() -> None:
    assert sorted(p.name for p in RAY_UP_DIR.glob("*.yaml")) == ["aws-gpu.yaml", "onprem.yaml"]


def test_cloud_config_has_a_node_type_per_pool() -> None:
    config = load_yaml(RAY_UP_DIR / "aws-gpu.yaml")
    resources = {name: nt["resources"] for name, nt in config["available_node_types"].items()}
    assert resources == {
        "head": {"CPU": 0},
        "rollout": {"CPU": 8, "GPU": 1, "rollout_pool": 1},
        "teacher": {"CPU": 8, "GPU": 1, "teacher_pool": 1},
        "learner": {"CPU": 16, "GPU": 1, "learner_pool": 1},
        "env": {"CPU": 16, "env_pool": 1},
    }


def test_wrong_type_in_node_type_fails_with_path() -> None:
    config = load_yaml(RAY_UP_DIR / "aws-gpu.yaml")
    config["available_node_types"]["learner"]["max_workers"] = "four"
    assert [str(p) for p in validate_ray_up_config("aws", config)] == [
        "aws: ray-up/turnopd: available_node_types.learner.max_workers: 'four' is not of type 'integer'"
    ]


def test_unknown_top_level_key_fails() -> None:
    config = load_yaml(RAY_UP_DIR / "onprem.yaml")
    config["min_workers"] = 3  # legacy key, not in Ray's schema
    problems = [str(p) for p in validate_ray_up_config("onprem", config)]
    assert problems == [
        "onprem: ray-up/turnopd-onprem: <root>: Additional properties are not allowed "
        "('min_workers' was unexpected)"
    ]


def test_ray_up_preparation_errors_are_reported() -> None:
    config = load_yaml(RAY_UP_DIR / "aws-gpu.yaml")
    config["head_node_type"] = "gpu-head"
    assert [str(p) for p in validate_ray_up_config("aws", config)] == [
        "aws: ray-up/turnopd: <root>: rejected by ray up: "
        "`head_node_type` must be one of `available_node_types`."
    ]
    onprem = load_yaml(RAY_UP_DIR / "onprem.yaml")
    del onprem["provider"]["head_ip"]
    assert "rejected by ray up: Please supply a `head_ip`" in str(validate_ray_up_config("op", onprem)[0])


def test_serve_config_has_both_apps() -> None:
    config = load_yaml(SERVE_CONFIG)
    assert validate_serve_config("serve", config) == []
    apps = {app["name"]: app for app in config["applications"]}
    assert apps["teacher"]["import_path"] == "services.teacher_scorer.serve_app:build_app"
    assert apps["env-gateway"]["import_path"] == "services.env_gateway.serve_app:build_app"
    assert {app["args"]["config_path"] for app in apps.values()} == {"/etc/turnopd/turnopd.toml"}
    assert config["http_options"] == {"host": "0.0.0.0", "port": 8000, "request_timeout_s": 600}


def test_broken_serve_config_fails_with_path() -> None:
    config = load_yaml(SERVE_CONFIG)
    config["applications"][1]["route_prefix"] = 8000
    assert [str(p) for p in validate_serve_config("serve", config)] == [
        "serve: serve-config: applications[1].route_prefix: Input should be a valid string"
    ]


def test_pool_script_prints_the_hosts_pool_resources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_pool_script()
    pools = RAY_UP_DIR / "onprem-pools.json"
    assert script.main([str(pools), "10.9.9.9", "192.0.2.12", "fe80::1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"learner_pool": 4, "teacher_pool": 4}
    assert script.main([str(pools), "192.0.2.13"]) == 0
    assert json.loads(capsys.readouterr().out) == {"env_pool": 4}


def test_pool_script_refuses_an_unknown_host(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_pool_script()
    assert script.main([str(RAY_UP_DIR / "onprem-pools.json"), "10.9.9.9"]) == 2
    assert "expected exactly one of the addresses ['10.9.9.9']" in capsys.readouterr().err
