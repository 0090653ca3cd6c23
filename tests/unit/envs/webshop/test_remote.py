"""The remote webshop adapter's glue: requests it sends, and every server failure as a clear error.
(Against a real server: tests/integration/test_webshop.py.)"""

import json

import httpx
import pytest

from services.envs.webshop.remote import (
    AgentGymWebShopClient,
    RemoteShopError,
    RemoteShopSession,
    plain_instruction,
)

PAGE = "WebShop [SEP] Instruction: [SEP] i need a hat [SEP] Search"


def client_with(handler) -> AgentGymWebShopClient:  # type: ignore[no-untyped-def]
    return AgentGymWebShopClient("http://shop.test/", 2.0, transport=httpx.MockTransport(handler))


def test_a_session_speaks_the_agentgym_protocol():
    seen: list[tuple[str, str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body or dict(request.url.params)))
        match request.url.path:
            case "/create":
                return httpx.Response(200, json=7)
            case "/reset":
                return httpx.Response(200, json=[PAGE, None])
            case "/instruction_text":
                return httpx.Response(200, json="Instruction: [SEP] i need a hat")
            case "/available_actions":
                return httpx.Response(200, json={"has_search_bar": True, "clickables": ["search"]})
            case "/step":
                return httpx.Response(
                    200, json={"state": "bought", "reward": 0.5, "done": True, "info": None}
                )
            case "/close":
                return httpx.Response(200, json={"closed": True})
        return httpx.Response(404)

    session = RemoteShopSession(client_with(handler), goal_id=205, gid="train/goal_00205", expert=True)
    opening = session.start()
    assert opening.observation == PAGE and opening.objective == "i need a hat"
    assert (
        opening.admissible_actions == ["search[<your keywords>]"] and opening.expert_action == "search[hat]"
    )
    outcome = session.step("search[hat]")
    assert outcome.done and not outcome.won and outcome.reward == 0.5
    assert outcome.observation == "bought\nEpisode finished with score=0.500. [WEBSHOP_FINAL_SCORE=0.500000]"
    session.close()
    assert seen == [
        ("POST", "/create", {}),
        ("POST", "/reset", {"env_idx": 7, "session_id": 205}),
        ("GET", "/instruction_text", {"env_idx": "7"}),
        ("GET", "/available_actions", {"env_idx": "7"}),
        ("POST", "/step", {"env_idx": 7, "action": "search[hat]"}),
        ("POST", "/close", {"env_idx": 7}),
    ]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (httpx.ReadTimeout("slow"), "did not answer POST /create within 2s"),
        (httpx.ConnectError("refused"), "cannot reach webshop server http://shop.test (POST /create)"),
        (httpx.Response(500, text="Internal Server Error"), "answered HTTP 500 to POST /create: Internal"),
        (httpx.Response(503, json={"detail": "full"}), "answered HTTP 503 to POST /create"),
        (httpx.Response(200, json="seven"), "malformed answer to POST /create"),
    ],
)
def test_server_failures_become_one_clear_error(answer, message):
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        return answer

    with pytest.raises(RemoteShopError, match="webshop server") as info:
        client_with(handler).create()
    assert message in str(info.value)


def test_closing_on_a_dead_server_is_logged_not_raised(caplog):
    calls = iter([httpx.Response(200, json=1), httpx.Response(200, json=[PAGE, None])])

    def handler(request: httpx.Request) -> httpx.Response:
        return next(calls, httpx.Response(502, text="bad gateway"))

    session = RemoteShopSession(client_with(handler), goal_id=0, gid="valid_unseen/goal_00000", expert=False)
    with pytest.raises(RemoteShopError, match="HTTP 502 to GET /instruction_text"):
        session.start()
    session.close()
    assert "could not close webshop env 1" in caplog.text


def test_plain_instruction_drops_webshops_label_and_separators():
    assert plain_instruction("Instruction: [SEP] i need  a hat") == "i need a hat"
    assert plain_instruction("i need a hat") == "i need a hat"
