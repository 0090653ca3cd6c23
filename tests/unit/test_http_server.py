"""No TurnOPD server listens beyond the loopback without a service token, one test per server (the env
gateway's is in tests/unit/env_gateway/test_service_token.py, the standalone teacher's in
tests/unit/cli/test_serve_cmd.py): each refuses before it reads a corpus, builds a shop or deploys,
and with a token it starts where it was told. Nothing is served: uvicorn.run and serve.run record."""

from types import SimpleNamespace

import pytest
import uvicorn
from pydantic import SecretStr
from ray import serve
from ray.serve import context as serve_context

from services import serve_config
from services.cli.main import main
from services.envs.webshop import server as webshop_server
from services.envs.webshop.settings import WebShopSettings
from services.errors import ConfigError
from services.http_server import run_http_server
from services.operations import teacher_ops
from services.serve_config import serve_proxy_host
from services.settings.per_service import TeacherServiceSettings
from services.settings.teacher import TeacherSettings

TOKEN = "bind-s3cret"


@pytest.fixture
def cli(capsys):
    """``cli(*args)``: run `turnopd ARGS...` in-process; its exit code and stderr."""

    def run(*args: object) -> SimpleNamespace:
        code = main([str(a) for a in args])
        return SimpleNamespace(code=code, err=capsys.readouterr().err)

    return run


@pytest.fixture
def started(monkeypatch) -> list[tuple[str, int]]:
    """Where uvicorn was asked to listen (it is not run); no token in the environment."""
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, **_: calls.append((host, port)))
    monkeypatch.delenv("TURNOPD_SERVICE_TOKEN", raising=False)
    monkeypatch.delenv("TURNOPD_PARENT_PID", raising=False)
    return calls


def refusal(service: str, host: str = "0.0.0.0") -> str:
    return (
        f"refusing to start the {service} on {host} without a service token: set TURNOPD_SERVICE_TOKEN "
        "(or [security] service_token), or bind 127.0.0.1"
    )


def test_the_one_helper_checks_the_bind_before_serving(started):
    with pytest.raises(ConfigError) as refused:
        run_http_server(object(), "10.1.2.3", 9000, None, "thing server")  # type: ignore[arg-type]
    assert str(refused.value) == refusal("thing server", "10.1.2.3")
    run_http_server(object(), "10.1.2.3", 9000, TOKEN, "thing server")  # type: ignore[arg-type]
    run_http_server(object(), "127.0.0.1", 9001, None, "thing server")  # type: ignore[arg-type]
    assert started == [("10.1.2.3", 9000), ("127.0.0.1", 9001)]


def test_serve_retrieval_beyond_the_loopback_without_a_token_refuses_to_start(
    cli, started, tmp_path, monkeypatch
):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "contents": "\\"Vel\\"\\nVel is a country."}\n')
    result = cli("serve", "retrieval", "--host", "0.0.0.0", "--corpus", corpus)
    assert (result.code, result.err.strip()) == (2, f"error: {refusal('retrieval server')}")
    assert started == []
    monkeypatch.setenv("TURNOPD_SERVICE_TOKEN", TOKEN)
    assert cli("serve", "retrieval", "--host", "0.0.0.0", "--corpus", corpus, "--port", "8201").code == 0
    assert started == [("0.0.0.0", 8201)]


def test_serve_webshop_beyond_the_loopback_without_a_token_refuses_to_start(cli, started, monkeypatch):
    built: list[WebShopSettings] = []

    def no_shop(ws: WebShopSettings, cache_dir: object) -> None:
        built.append(ws)
        raise AssertionError("the shop was built")

    monkeypatch.setattr(webshop_server, "load_shop", no_shop)
    result = cli("serve", "webshop", "--host", "0.0.0.0")
    assert (result.code, result.err.strip()) == (2, f"error: {refusal('webshop server')}")
    assert built == [] and started == []


def test_the_runs_teacher_app_is_not_deployed_behind_an_open_proxy(monkeypatch):
    """The training run deploys its teacher with serve.run: behind a Serve proxy on 0.0.0.0 it needs
    the token, as `turnopd serve teacher` does."""
    deployed: list[str] = []
    monkeypatch.setattr(teacher_ops.serve, "run", lambda app, name, route_prefix: deployed.append(name))
    monkeypatch.setattr(teacher_ops, "teacher_application", lambda *args: "app")
    monkeypatch.setattr(serve_config, "serve_proxy_host", lambda: "0.0.0.0")
    settings = TeacherServiceSettings(
        teacher=TeacherSettings(model="/ckpt"), top_k=4, default_model="", cache_dir=None
    )
    with pytest.raises(ConfigError) as refused:
        teacher_ops.deploy_teacher(settings)
    assert str(refused.value) == refusal("teacher app (behind the Serve proxy)")
    assert deployed == []
    teacher_ops.deploy_teacher(settings.model_copy(update={"service_token": SecretStr(TOKEN)}))
    monkeypatch.setattr(serve_config, "serve_proxy_host", lambda: "127.0.0.1")
    teacher_ops.deploy_teacher(settings)
    assert deployed == ["teacher", "teacher"]


def test_the_proxy_host_is_the_running_serves_else_where_serve_run_would_start_it(monkeypatch):
    monkeypatch.delenv("RAY_SERVE_DEFAULT_HTTP_HOST", raising=False)
    monkeypatch.setattr(serve_context, "_get_global_client", lambda raise_if_no_controller_running: None)
    assert serve_proxy_host() == "127.0.0.1"
    running = SimpleNamespace(http_config=serve.config.HTTPOptions(host="0.0.0.0"))
    monkeypatch.setattr(serve_context, "_get_global_client", lambda raise_if_no_controller_running: running)
    assert serve_proxy_host() == "0.0.0.0"
    disabled = SimpleNamespace(http_config=SimpleNamespace(host=None))
    monkeypatch.setattr(serve_context, "_get_global_client", lambda raise_if_no_controller_running: disabled)
    assert serve_proxy_host() == "127.0.0.1"  # no proxy at all
