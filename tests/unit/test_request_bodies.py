"""No endpoint unpickles client data: every HTTP body is parsed as JSON into a pydantic model, route
handlers never read raw bodies, and no service module imports a pickle-family deserialiser."""

import ast
import inspect
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel

from services.env_gateway.app import create_app
from services.settings.env_gateway import EnvGatewaySettings
from services.teacher_scorer.routes import build_http_app

SERVICES = Path(__file__).resolve().parents[2] / "services"
UNSAFE_MODULES = {"pickle", "cPickle", "cloudpickle", "dill", "marshal", "shelve", "joblib", "jsonpickle"}
RAW_BODY_READS = (".body()", ".stream()", ".form()", "await request.json(")


@asynccontextmanager
async def _no_api():
    yield None


def api_routes(routes) -> list[APIRoute]:
    """Every APIRoute, looking inside included routers (FastAPI keeps those as wrappers)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += api_routes(route.original_router.routes)
    return found


def apps():
    return {
        "env-gateway": create_app(EnvGatewaySettings(), episode_api=_no_api),
        "teacher": build_http_app(lambda: None),
    }


@pytest.mark.parametrize("name", ["env-gateway", "teacher"])
def test_every_body_is_a_pydantic_model_and_no_handler_reads_raw_bytes(name):
    routes = api_routes(apps()[name].routes)
    assert len(routes) == {"env-gateway": 6, "teacher": 6}[name]
    bodies = []
    for route in routes:
        for param in route.dependant.body_params:
            assert isinstance(param.field_info.annotation, type) and issubclass(
                param.field_info.annotation, BaseModel
            ), (route.path, param)
            bodies.append(param.field_info.annotation.__name__)
        source = inspect.getsource(route.endpoint)
        assert not any(read in source for read in RAW_BODY_READS), route.path
    assert (
        bodies
        == {
            "env-gateway": ["EpisodeCreate", "StepRequest"],
            "teacher": ["ScoreRequest", "CompletionRequest"],
        }[name]
    )


def test_no_service_module_imports_a_pickle_family_deserialiser():
    offenders = []
    for path in sorted(SERVICES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            offenders += [f"{path.relative_to(SERVICES)}: {n}" for n in names if n in UNSAFE_MODULES]
    assert offenders == []
