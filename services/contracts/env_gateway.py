"""HTTP API of the env gateway (`/v1/...`): what rollout workers send and what they get back."""

from typing import Literal

from pydantic import Field

from services.contracts.base import Contract, JsonBool, JsonNonNegInt

EnvName = Literal["alfworld", "textworld", "search", "webshop"]
Split = Literal["train", "valid_unseen"]

# The paper's six household task types (ALFWorld's names without the `_simple`/`_in_recep` tails).
HOUSEHOLD_TASK_TYPES: tuple[str, ...] = (
    "pick_and_place",
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "look_at_obj_in_light",
    "pick_two_obj_and_place",
)


class EpisodeCreate(Contract):
    """Start an episode of one game, chosen from the split's pool by ``seed`` (random when null)."""

    # rollout_worker -> env_gateway
    env: EnvName = Field(description="Env backend.")
    split: Split = Field(description="Game pool: `train` or the held-out `valid_unseen` layouts.")
    seed: JsonNonNegInt | None = Field(None, description="Picks the game deterministically; null draws one.")
    task_type: str | None = Field(None, min_length=1, description="Restrict to one task type (see /v1/envs).")
    expert: JsonBool = Field(
        False, description="Also return the expert policy's next action after every turn."
    )


class EpisodeStart(Contract):
    """The first observation of a new episode."""

    # env_gateway -> rollout_worker
    episode_id: str = Field(description="Handle for /v1/episodes/{id}.")
    observation: str = Field(description="The game's opening text (room description and task).")
    objective: str = Field(description="The task statement alone, e.g. 'put a clean apple in fridge.'.")
    admissible_actions: list[str] = Field(description="Actions the game accepts now, sorted.")
    turn: int = Field(0, ge=0, description="Accepted steps so far (0 at the start).")
    task_type: str = Field(description="Task type of the chosen game.")
    game_id: str = Field(description="Stable id of the chosen game (split/task_type/index).")
    seed: int = Field(ge=0, description="The seed that chose the game (drawn when the request had none).")
    expert_action: str | None = Field(None, description="The expert's next action (only when requested).")


class StepRequest(Contract):
    """Play one action; it must be one of the current admissible actions."""

    # rollout_worker -> env_gateway
    action: str = Field(min_length=1, max_length=512, description="One admissible action, verbatim.")


class StepResult(Contract):
    """The game's answer to one accepted action."""

    # env_gateway -> rollout_worker
    observation: str = Field(description="The game's feedback to the action.")
    reward: float = Field(
        description="1.0 on the step that completes the goal, else 0.0; webshop: the purchase score in [0, 1]."
    )
    done: bool = Field(description="The episode is over; further steps are refused with 409.")
    won: bool = Field(description="The goal is completed.")
    admissible_actions: list[str] = Field(description="Actions the game accepts now, sorted.")
    turn: int = Field(ge=1, description="Accepted steps so far, this one included.")
    expert_action: str | None = Field(None, description="The expert's next action (only when requested).")


class ActionRejected(Contract):
    """Body of the 422 answer to an action that is not admissible; the game is unchanged."""

    # env_gateway -> rollout_worker
    detail: str = Field(description="One-paragraph explanation, listing every problem found.")
    problems: list[str] = Field(description="Each problem with the action, one per item.")
    admissible_actions: list[str] = Field(description="What the game accepts now.")


class EnvInfo(Contract):
    """One env backend as served by this gateway."""

    # env_gateway -> rollout_worker
    name: EnvName = Field(description="Backend name, as used in EpisodeCreate.env.")
    splits: list[Split] = Field(description="Splits with games.")
    task_types: list[str] = Field(description="Task types accepted in EpisodeCreate.task_type.")
    source: str = Field(description="Where the games come from (generated offline, or a data directory).")
    games_per_split: dict[str, int] = Field(description="Pool size of every split.")


class EnvCatalog(Contract):
    """All env backends this gateway serves."""

    # env_gateway -> rollout_worker
    envs: list[EnvInfo] = Field(description="One entry per backend.")


class Health(Contract):
    """Liveness and capacity of one gateway replica."""

    # env_gateway -> operator / rollout_worker
    status: Literal["ok", "degraded"] = Field(description="'degraded' while a worker is being replaced.")
    workers: int = Field(ge=0, description="Live env worker processes.")
    workers_expected: int = Field(ge=0, description="Configured env worker processes.")
    active_episodes: int = Field(ge=0, description="Episodes held by this replica.")
    worker_restarts: int = Field(ge=0, description="Workers replaced since start.")
    worker_pids: list[int] = Field(description="Process ids of the env workers, by slot.")
