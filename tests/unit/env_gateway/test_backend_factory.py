"""The gateway's service token reaches the env backends' remote servers: `make_backend` and the
env worker's host hand it to the search env's retriever and the webshop client, which the real
retrieval and webshop apps (with that token) then answer; a worker is started with it on stdin."""

import json
import random
from functools import partial
from pathlib import Path

import pytest
from in_process_app import app_transport

from services.contracts.env_worker import OpenDone, OpenEpisode, StepDone, StepEpisode, WorkerError
from services.env_gateway.backend_factory import make_backend
from services.env_gateway.worker_process import EpisodeHost, WorkerStart
from services.envs.backend import GameChoice
from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.remote import RemoteRetriever
from services.envs.search.retrieval import RetrievalError
from services.envs.search.settings import SearchEnvSettings
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.remote import AgentGymWebShopClient
from services.envs.webshop.server import create_app as shop_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.settings import WebShopSettings
from services.envs.webshop.shop import Shop
from services.retrieval_server.app import create_app as retrieval_app
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.retrieval_server import RetrievalServerSettings

TOKEN = "gateway-token"
QUESTION = {
    "question": "Where?",
    "golden_answers": ["Kessrow"],
    "data_source": "single_hop",
    "split": "train",
}


@pytest.fixture
def settings(tmp_path: Path) -> EnvGatewaySettings:
    """A gateway whose search env retrieves remotely and whose webshop is a remote server."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps(QUESTION) + "\n")
    remote_search = SearchEnvSettings(
        retriever="remote", retrieval_url="http://retrieval.test", questions_file=questions
    )
    remote_shop = WebShopSettings(remote_url="http://shop.test", goals_eval=5, goals_train=10)
    return EnvGatewaySettings(cache_dir=tmp_path, search=remote_search, webshop=remote_shop)


@pytest.fixture(autouse=True)
def servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients the backends build talk to the real apps (token ``TOKEN``) in-process."""
    docs = [("city-1", '"Kessrow"\nKessrow is a city in Vel.')]
    retrieval = app_transport(retrieval_app(Bm25Retriever(docs), RetrievalServerSettings(), "test", TOKEN))
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    shop_transport = app_transport(shop_app(ShopEnvs(shop, max_envs=4, rng=random.Random(0)), token=TOKEN))

    def shop_client(url: str, timeout_s: float, service_token: str | None) -> AgentGymWebShopClient:
        return AgentGymWebShopClient(url, timeout_s, service_token, transport=shop_transport)

    monkeypatch.setattr(
        "services.envs.search.backend.RemoteRetriever", partial(RemoteRetriever, transport=retrieval)
    )
    monkeypatch.setattr("services.envs.webshop.remote.remote_client", shop_client)


def search_once(settings: EnvGatewaySettings, token: str | None) -> str:
    backend = make_backend("search", settings, service_token=token)
    session = backend.open("train", GameChoice("single_hop", 0), expert=False)
    session.start()
    return session.step("search[Kessrow]").observation


def test_make_backend_hands_the_token_to_the_retriever(settings: EnvGatewaySettings):
    assert "Kessrow is a city in Vel." in search_once(settings, TOKEN)
    with pytest.raises(RetrievalError, match="demands a service token that this run does not have"):
        search_once(settings, None)


def test_make_backend_hands_the_token_to_the_webshop_client(settings: EnvGatewaySettings):
    backend = make_backend("webshop", settings, service_token=TOKEN)
    session = backend.open("train", backend.choose("train", 0, None), expert=False)
    try:
        assert session.start().observation.startswith("WebShop [SEP] Instruction:")
    finally:
        session.close()


def test_the_worker_host_serves_remote_episodes_with_the_token(settings: EnvGatewaySettings):
    host = EpisodeHost(settings, service_token=TOKEN)
    try:
        shop = host.handle(OpenEpisode(episode_id="w", env="webshop", split="valid_unseen", seed=1))
        assert isinstance(shop, OpenDone) and shop.game_id == "valid_unseen/goal_00001"
        assert isinstance(
            host.handle(OpenEpisode(episode_id="s", env="search", split="train", seed=0)), OpenDone
        )
        found = host.handle(StepEpisode(episode_id="s", action="search[Kessrow]"))
        assert isinstance(found, StepDone) and "Kessrow is a city in Vel." in found.observation
    finally:
        host.close_all()


def test_a_worker_host_without_the_token_reports_the_refusal(settings: EnvGatewaySettings):
    host = EpisodeHost(settings, service_token=None)
    refused = host.handle(OpenEpisode(episode_id="w", env="webshop", split="valid_unseen", seed=1))
    assert isinstance(refused, WorkerError) and refused.error == "TurnOPDError"
    assert "webshop server at http://shop.test demands a service token" in refused.message


def test_worker_start_carries_the_token_in_json_and_hides_it_in_repr(settings: EnvGatewaySettings):
    start = WorkerStart(settings=settings, service_token=TOKEN)
    assert WorkerStart.model_validate_json(start.model_dump_json()) == start
    assert WorkerStart.model_validate_json(start.model_dump_json()).service_token == TOKEN
    assert TOKEN not in repr(start)
    assert (
        WorkerStart.model_validate_json(WorkerStart(settings=settings).model_dump_json()).service_token
        is None
    )
