"""The four HTTP apps answer only what their `/openapi.json` documents: schemathesis fuzzes every
operation of each (in-process over ASGI, every check, a fixed seed) and finds no failure and no 5xx.

The apps are the real ones: the env gateway with its env worker pool (subprocesses) over small
generated game pools, the teacher routes over a tiny random Qwen3 scored on the CPU, the retrieval
server over a BM25 index, and the webshop server over a small generated shop.
"""

import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from in_process_teacher import InProcessBackend
from schemathesis import Case, CheckContext, Response
from schemathesis.python import asgi
from schemathesis.schemas import BaseSchema

from services.env_gateway.app import create_app as gateway_app
from services.envs.search.bm25_index import Bm25Retriever
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.server import create_app as webshop_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.shop import Shop
from services.retrieval_server.app import create_app as retrieval_app
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.retrieval_server import RetrievalServerSettings
from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, write_random_qwen3
from services.teacher_scorer.routes import build_http_app as teacher_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model

pytestmark = pytest.mark.integration

FUZZ_CONFIG = {
    "seed": 20240611,
    "generation": {"max-examples": 30},
    # An episode's first game of an env is generated on the spot (tw-make for textworld): seconds on
    # an idle machine, more on a loaded one. The gateway's own call timeout is 120 s.
    "request-timeout": 120,
    "checks": {
        # A schema-valid request may still be refused by the domain (an unknown episode, an action the
        # game does not admit, a token id outside the teacher's vocabulary), with a documented status
        # and body; `schema_valid_requests_parse` keeps such refusals honest. Every other check keeps
        # its default.
        "positive_data_acceptance": {"expected-statuses": ["2XX", "404", "409", "410", "413", "422"]}
    },
}


def schema_valid_requests_parse(ctx: CheckContext, response: Response, case: Case) -> None:
    """A request the schema calls valid is never refused as unparseable (an ``InvalidRequest``), but
    for rules JSON Schema cannot state: a model validator's ``value_error`` (ScoreSequence's
    positions must lie inside its tokens)."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code != 422:
        return
    detail = response.json()["detail"]
    if isinstance(detail, list):
        types = sorted({problem["type"] for problem in detail})
        assert types == ["value_error"], f"a schema-valid request was refused as unparseable: {detail}"


def build_gateway(root: Path) -> FastAPI:
    settings = EnvGatewaySettings.model_validate(
        {
            "cache_dir": str(root / "envs"),
            "workers": 1,
            "max_episodes_per_worker": 4096,  # the fuzzer never deletes most episodes it opens
            "household": {"games_per_task_type_train": 2, "games_per_task_type_valid": 1},
            "textworld": {"games_per_challenge_train": 1, "games_per_challenge_valid": 1},
            "search": {"countries": 3, "cities": 6, "people": 10, "organisations": 3, "works": 6},
            "webshop": {"products": 60, "goals_eval": 5, "goals_train": 10},
        }
    )
    return gateway_app(settings)


def build_teacher(root: Path) -> FastAPI:
    spec = RandomQwen3Spec(vocab_size=128, hidden_size=32, num_layers=1, num_heads=2, max_context=64)
    path = write_random_qwen3(root / "teacher", spec)
    engine = TransformersEngine(load_teacher_model(path, "cpu", "float32"))
    backend = InProcessBackend(TeacherScorer(engine, token_budget=256, max_batch_size=8), default_top_k=4)
    return teacher_app(lambda: backend)


def build_retrieval(_: Path) -> FastAPI:
    documents = [
        ("city-1", '"Kessrow"\nKessrow is a city in Vel.'),
        ("country-1", '"Vel"\nVel is a country. The capital of Vel is Kessrow.'),
    ]
    return retrieval_app(Bm25Retriever(documents), RetrievalServerSettings(), "fuzz")


def build_webshop(_: Path) -> FastAPI:
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    return webshop_app(ShopEnvs(shop, max_envs=100_000, rng=random.Random(0)))


APPS: dict[str, Callable[[Path], FastAPI]] = {
    "env-gateway": build_gateway,
    "teacher": build_teacher,
    "retrieval": build_retrieval,
    "webshop": build_webshop,
}


@pytest.fixture(scope="module", params=list(APPS))
def app_schema(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BaseSchema]:
    app = APPS[request.param](tmp_path_factory.mktemp(request.param))
    config = schemathesis.Config.from_dict(FUZZ_CONFIG)
    # Loading the schema starts the app's lifespan (the gateway's worker pool); it ends with the app.
    yield schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    asgi.shutdown_lifespans()


schema = schemathesis.pytest.from_fixture("app_schema")


@schema.parametrize()
@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented(case: Case) -> None:
    response = case.call_and_validate(additional_checks=[schema_valid_requests_parse])
    assert response.status_code < 500, response.text


@pytest.mark.parametrize("app_schema", ["env-gateway"], indirect=True)
def test_episode_workflows_answer_as_documented(app_schema: BaseSchema) -> None:
    """Stateful: episodes are created, stepped and deleted by the ids the gateway answered (links
    schemathesis infers from the schema), and every answer is checked as above."""
    answers: Counter[tuple[str, int]] = Counter()

    class EpisodeWorkflow(app_schema.as_state_machine()):  # type: ignore[misc]
        def after_call(self, response: Response, case: Case) -> None:
            super().after_call(response, case)
            answers[case.operation.label, response.status_code] += 1

        def validate_response(self, response: Response, case: Case, **kwargs: Any) -> None:
            super().validate_response(response, case, additional_checks=[schema_valid_requests_parse])

    EpisodeWorkflow.run(
        settings=settings(
            max_examples=10,
            stateful_step_count=6,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
    # The workflows reached real episodes (an id from a 201 deleted with 204), and nothing failed.
    assert answers["POST /v1/episodes", 201] > 0 and answers["DELETE /v1/episodes/{episode_id}", 204] > 0
    assert [key for key in answers if key[1] >= 500] == []
