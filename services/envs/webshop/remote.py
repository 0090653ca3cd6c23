"""Remote webshop: episodes played on an AgentGym `agentenv_webshop` server over HTTP.

The session creates an env on the server, resets it to the goal id (AgentGym's ``session_id``),
and reads pages, actions and the instruction through the protocol in
`services.envs.webshop.contract`; with the run's service token every call carries
``Authorization: Bearer <token>``. Every failure of the server -- no connection, no answer within
``remote_timeout_s``, the token refused or missing (401), an HTTP error, a malformed body -- raises
``RemoteShopError`` naming the server, the call and the cause; the gateway reports it as that
episode's error (HTTP 500).
"""

import logging
from functools import lru_cache
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from services.envs.webshop.backend import REMOTE_TASK_TYPE, ShopGameSession
from services.envs.webshop.contract import (
    AvailableActions,
    CloseQuery,
    CloseResponse,
    ResetQuery,
    StepQuery,
    StepResponse,
)
from services.envs.webshop.pages import SEP, admissible_actions
from services.errors import TurnOPDError
from services.service_auth import auth_headers, token_refusal

log = logging.getLogger(__name__)
_RESET_REPLY: TypeAdapter[tuple[str, None]] = TypeAdapter(tuple[str, None])
_INT: TypeAdapter[int] = TypeAdapter(int)
_STR: TypeAdapter[str] = TypeAdapter(str)


class RemoteShopError(TurnOPDError):
    """The remote webshop server failed, timed out, or answered something unreadable."""


class AgentGymWebShopClient:
    """Blocking client of one `agentenv_webshop` server (one per worker process and URL)."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float,
        service_token: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``service_token``: the bearer the server demands (None: send none)."""
        self.url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._sends_token = bool(service_token)
        headers = auth_headers(service_token)
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, transport=transport, headers=headers)

    def create(self) -> int:
        return self._parse(_INT, "POST", "/create")

    def reset(self, env_idx: int, goal_id: int) -> str:
        body = ResetQuery(env_idx=env_idx, session_id=goal_id).model_dump()
        return self._parse(_RESET_REPLY, "POST", "/reset", json=body)[0]

    def step(self, env_idx: int, action: str) -> StepResponse:
        body = StepQuery(env_idx=env_idx, action=action).model_dump()
        return self._parse(StepResponse, "POST", "/step", json=body)

    def available_actions(self, env_idx: int) -> AvailableActions:
        return self._parse(AvailableActions, "GET", "/available_actions", params={"env_idx": env_idx})

    def observation(self, env_idx: int) -> str:
        return self._parse(_STR, "GET", "/observation", params={"env_idx": env_idx})

    def instruction_text(self, env_idx: int) -> str:
        return self._parse(_STR, "GET", "/instruction_text", params={"env_idx": env_idx})

    def close(self, env_idx: int) -> bool:
        body = CloseQuery(env_idx=env_idx).model_dump()
        return self._parse(CloseResponse, "POST", "/close", json=body).closed

    def _parse(self, model: Any, method: str, path: str, **kwargs: Any) -> Any:
        raw = self._call(method, path, **kwargs)
        try:
            if isinstance(model, TypeAdapter):
                return model.validate_json(raw)
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise RemoteShopError(
                f"webshop server {self.url} sent a malformed answer to {method} {path}: {exc}"
            ) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> bytes:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise RemoteShopError(
                f"webshop server {self.url} did not answer {method} {path} within {self.timeout_s:g}s"
            ) from None
        except httpx.TransportError as exc:
            raise RemoteShopError(
                f"cannot reach webshop server {self.url} ({method} {path}): {exc}"
            ) from None
        if response.status_code == 401:
            refusal = token_refusal("webshop server", self.url, self._sends_token)
            raise RemoteShopError(f"{refusal} ({method} {path})")
        if response.status_code >= 400:
            raise RemoteShopError(
                f"webshop server {self.url} answered HTTP {response.status_code} to {method} {path}: "
                f"{response.text[:300]}"
            )
        return response.content


@lru_cache(maxsize=8)
def remote_client(url: str, timeout_s: float, service_token: str | None) -> AgentGymWebShopClient:
    """The worker process's client of a server (its connections are reused by every session)."""
    return AgentGymWebShopClient(url, timeout_s, service_token)


def plain_instruction(text: str) -> str:
    """WebShop's instruction text without its 'Instruction:' label and separators."""
    flat = " ".join(text.replace(SEP.strip(), " ").split())
    return flat[len("instruction:") :].strip() if flat.lower().startswith("instruction:") else flat


class RemoteShopSession(ShopGameSession):
    def __init__(self, client: AgentGymWebShopClient, goal_id: int, gid: str, expert: bool) -> None:
        super().__init__(REMOTE_TASK_TYPE, gid, expert)
        self._client = client
        self._goal_id = goal_id
        self._env: int | None = None

    def _live(self) -> int:
        if self._env is None:
            raise RuntimeError("the remote webshop env is not created yet")
        return self._env

    def _begin(self) -> tuple[str, str]:
        self._env = self._client.create()
        page = self._client.reset(self._env, self._goal_id)
        return page, plain_instruction(self._client.instruction_text(self._env))

    def _act(self, action: str) -> tuple[str, float, bool]:
        answer = self._client.step(self._live(), action)
        return answer.state, answer.reward, answer.done

    def _actions(self) -> list[str]:
        actions = self._client.available_actions(self._live())
        return admissible_actions(actions.has_search_bar, actions.clickables)

    def close(self) -> None:
        """Free the server's env; a server that is gone only costs it memory (logged, not raised)."""
        env, self._env = self._env, None
        if env is None:
            return
        try:
            self._client.close(env)
        except RemoteShopError as exc:
            log.warning("could not close webshop env %s: %s", env, exc)
