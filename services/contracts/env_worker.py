"""Messages between the env gateway and its env worker processes (JSON over a pipe).

Each worker hosts many episodes; the gateway owns turn counting and action validation, the worker
owns the game engines. Every request gets exactly one reply: the matching ``*Done`` message or a
``WorkerError``.
"""

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from services.contracts.base import Contract
from services.contracts.env_gateway import EnvName, Split


class OpenEpisode(Contract):
    # env_gateway -> env_worker
    kind: Literal["open"] = "open"
    episode_id: str
    env: EnvName
    split: Split
    seed: int = Field(ge=0)
    task_type: str | None = None
    expert: bool = False


class StepEpisode(Contract):
    # env_gateway -> env_worker
    kind: Literal["step"] = "step"
    episode_id: str
    action: str = Field(min_length=1, description="An admissible action, exactly as the game listed it.")


class CloseEpisode(Contract):
    # env_gateway -> env_worker
    kind: Literal["close"] = "close"
    episode_id: str


class Ping(Contract):
    # env_gateway -> env_worker
    kind: Literal["ping"] = "ping"


WorkerRequest = Annotated[OpenEpisode | StepEpisode | CloseEpisode | Ping, Field(discriminator="kind")]


class OpenDone(Contract):
    # env_worker -> env_gateway
    kind: Literal["opened"] = "opened"
    observation: str
    objective: str
    admissible_actions: list[str]
    task_type: str
    game_id: str
    expert_action: str | None = None


class StepDone(Contract):
    # env_worker -> env_gateway
    kind: Literal["stepped"] = "stepped"
    observation: str
    reward: float
    done: bool
    won: bool
    admissible_actions: list[str]
    expert_action: str | None = None


class CloseDone(Contract):
    # env_worker -> env_gateway
    kind: Literal["closed"] = "closed"
    existed: bool


class Pong(Contract):
    # env_worker -> env_gateway
    kind: Literal["pong"] = "pong"
    pid: int
    episodes: int = Field(ge=0)


class WorkerError(Contract):
    """A request the worker could not serve; ``error`` names the TurnOPD error class to raise."""

    # env_worker -> env_gateway
    kind: Literal["error"] = "error"
    error: Literal["InputError", "NotFoundError", "ConflictError", "ConfigError", "TurnOPDError"]
    message: str


WorkerReply = Annotated[OpenDone | StepDone | CloseDone | Pong | WorkerError, Field(discriminator="kind")]

REQUEST_ADAPTER: TypeAdapter[OpenEpisode | StepEpisode | CloseEpisode | Ping] = TypeAdapter(WorkerRequest)
REPLY_ADAPTER: TypeAdapter[OpenDone | StepDone | CloseDone | Pong | WorkerError] = TypeAdapter(WorkerReply)
