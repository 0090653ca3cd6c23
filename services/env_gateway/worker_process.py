"""The env worker process: hosts game sessions and answers the gateway's requests over a pipe.

`EpisodeHost` is the request handler (usable in-process in tests); `worker_main` is the process
entry point. A worker is started with a `WorkerStart` on its stdin: the gateway's settings and its
service token, which the backends send to their remote servers (never read from the environment).
Requests are served one at a time: game engines are not thread-safe.
"""

import os
import signal
import sys
from multiprocessing.connection import Connection

from pydantic import Field

from services.contracts.base import Contract
from services.contracts.env_gateway import EnvName
from services.contracts.env_worker import (
    REPLY_ADAPTER,
    REQUEST_ADAPTER,
    CloseDone,
    CloseEpisode,
    OpenDone,
    OpenEpisode,
    Ping,
    Pong,
    StepDone,
    StepEpisode,
    WorkerError,
)
from services.env_gateway.backend_factory import make_backend
from services.envs.backend import EnvBackend, GameSession
from services.errors import ConfigError, ConflictError, InputError, NotFoundError, TurnOPDError
from services.settings.env_gateway import EnvGatewaySettings

Request = OpenEpisode | StepEpisode | CloseEpisode | Ping
Reply = OpenDone | StepDone | CloseDone | Pong | WorkerError


class WorkerStart(Contract):
    """What a worker process is started with (here, not in `services.contracts`: its settings field
    would make the contracts import the settings tree, which imports the contracts)."""

    # env_gateway -> env_worker (once, on the worker's stdin)
    settings: EnvGatewaySettings
    service_token: str | None = Field(None, repr=False, description="The gateway's service token.")


class EpisodeHost:
    """The sessions of one worker, keyed by episode id; ``service_token``: the gateway's, sent by
    the backends to their remote servers (None: the run has none)."""

    def __init__(self, settings: EnvGatewaySettings, *, service_token: str | None) -> None:
        self._settings = settings
        self._service_token = service_token
        self._backends: dict[EnvName, EnvBackend] = {}
        self._sessions: dict[str, GameSession] = {}

    def backend(self, env: EnvName) -> EnvBackend:
        if env not in self._backends:
            self._backends[env] = make_backend(env, self._settings, service_token=self._service_token)
        return self._backends[env]

    def handle(self, request: Request) -> Reply:
        """Serve one request; expected failures become a `WorkerError` reply, never a dead worker."""
        try:
            return self._dispatch(request)
        except (InputError, NotFoundError, ConflictError, ConfigError) as exc:
            return WorkerError.model_validate({"error": type(exc).__name__, "message": str(exc)})
        except ValueError as exc:
            return WorkerError(error="InputError", message=str(exc))
        except Exception as exc:
            # An engine crash inside one game: drop that session, keep serving the others.
            episode_id = getattr(request, "episode_id", None)
            if episode_id is not None:
                self._drop(episode_id)
            return WorkerError(error="TurnOPDError", message=f"{type(exc).__name__}: {exc}")

    def _dispatch(self, request: Request) -> Reply:
        match request:
            case Ping():
                return Pong(pid=os.getpid(), episodes=len(self._sessions))
            case OpenEpisode():
                return self._open(request)
            case StepEpisode():
                session = self._session(request.episode_id)
                out = session.step(request.action)
                return StepDone(
                    observation=out.observation,
                    reward=out.reward,
                    done=out.done,
                    won=out.won,
                    admissible_actions=out.admissible_actions,
                    expert_action=out.expert_action,
                )
            case CloseEpisode():
                return CloseDone(existed=self._drop(request.episode_id))
            case _:
                raise TurnOPDError(f"unknown worker request {request!r}")

    def _open(self, request: OpenEpisode) -> OpenDone:
        if request.episode_id in self._sessions:
            raise ConflictError(f"episode {request.episode_id} already exists on this worker")
        backend = self.backend(request.env)
        choice = backend.choose(request.split, request.seed, request.task_type)
        session = backend.open(request.split, choice, request.expert)
        try:
            opening = session.start()
        except BaseException:
            session.close()
            raise
        self._sessions[request.episode_id] = session
        return OpenDone(
            observation=opening.observation,
            objective=opening.objective,
            admissible_actions=opening.admissible_actions,
            task_type=opening.task_type,
            game_id=opening.game_id,
            expert_action=opening.expert_action,
        )

    def _session(self, episode_id: str) -> GameSession:
        try:
            return self._sessions[episode_id]
        except KeyError:
            raise NotFoundError(f"episode {episode_id} is not hosted by worker {os.getpid()}") from None

    def _drop(self, episode_id: str) -> bool:
        session = self._sessions.pop(episode_id, None)
        if session is not None:
            session.close()
        return session is not None

    def close_all(self) -> None:
        for episode_id in list(self._sessions):
            self._drop(episode_id)


def worker_main(conn: Connection, start: WorkerStart) -> None:
    """Serve requests until the gateway closes the pipe."""
    # Ctrl-C reaches the whole process group; the gateway decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host = EpisodeHost(start.settings, service_token=start.service_token)
    try:
        while True:
            try:
                raw = conn.recv_bytes()
            except (EOFError, OSError):
                break
            reply = host.handle(REQUEST_ADAPTER.validate_json(raw))
            conn.send_bytes(REPLY_ADAPTER.dump_json(reply))
    finally:
        host.close_all()


if __name__ == "__main__":
    # `python -m services.env_gateway.worker_process FD`: a WorkerStart on stdin, requests on socket FD.
    worker_main(Connection(int(sys.argv[1])), WorkerStart.model_validate_json(sys.stdin.read()))
