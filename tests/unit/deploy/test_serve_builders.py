"""The Serve config's import paths and args build real applications (offline: nothing is deployed)."""

from pathlib import Path

import pytest
import yaml

from services.env_gateway import serve_app as gateway_app
from services.errors import ConfigError
from services.service_auth import TOKEN_ENV
from services.teacher_scorer import serve_app as teacher_app

REPO = Path(__file__).resolve().parents[3]
CLUSTER_CONFIG = REPO / "deploy" / "config" / "paper_alfworld_cluster.toml"


def serve_apps() -> dict[str, dict]:
    config = yaml.safe_load((REPO / "deploy" / "serve" / "serve-config.yaml").read_text())
    return {app["name"]: app for app in config["applications"]}


@pytest.fixture(autouse=True)
def service_token(monkeypatch):
    """Serve configs are cluster deploys: their builders demand the service token."""
    monkeypatch.setenv(TOKEN_ENV, "cluster-token")


def test_every_serve_config_app_builds_with_its_args():
    for name, app in serve_apps().items():
        module, _, func = app["import_path"].partition(":")
        builder = {
            "services.env_gateway.serve_app": gateway_app,
            "services.teacher_scorer.serve_app": teacher_app,
        }[module]
        args = {**app["args"], "config_path": str(CLUSTER_CONFIG)}
        application = getattr(builder, func)(args)
        assert application is not None, name


def test_env_gateway_builder_shards_follow_the_cluster_section(monkeypatch):
    seen = []
    monkeypatch.setattr(
        gateway_app, "gateway_application", lambda settings, token: seen.append((settings, token)) or "app"
    )
    assert gateway_app.build_app({"config_path": str(CLUSTER_CONFIG)}) == "app"
    assert [s.replicas for s, _ in seen] == [4]  # [cluster] env_replicas of the paper-scale cluster
    assert [t for _, t in seen] == ["cluster-token"]  # from TURNOPD_SERVICE_TOKEN


@pytest.mark.parametrize("builder", [gateway_app.build_app, teacher_app.build_app])
def test_builders_refuse_to_deploy_without_a_service_token(builder, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(ConfigError, match="without a service token"):
        builder({"config_path": str(CLUSTER_CONFIG)})


@pytest.mark.parametrize("builder", [gateway_app.build_app, teacher_app.build_app])
def test_unknown_builder_args_are_config_errors(builder):
    with pytest.raises(ConfigError, match="unknown key"):
        builder({"config_path": str(CLUSTER_CONFIG), "bogus": 1})
