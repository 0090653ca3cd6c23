"""Expert demonstrations: episodes the env gateway's expert played, as the gateway returned them.

They are stored (one JSON line per episode) in the dataset cache and read back by later
`turnopd teacher train` runs. Keeping the gateway's own messages, rather than rendered text,
lets training render them exactly as the agent loop renders play.
"""

from pydantic import Field, model_validator

from services.contracts.base import Contract
from services.contracts.env_gateway import EpisodeStart, StepResult


class ExpertTurn(Contract):
    """One action of an expert episode and the gateway's answer to it."""

    # env_gateway -> teacher_training (dataset cache)
    action: str = Field(min_length=1, description="The action played (the expert's, unless a detour).")
    result: StepResult = Field(description="The gateway's answer to the action.")
    detour: bool = Field(
        False,
        description="A deliberate random action instead of the expert's (a recovery demonstration: "
        "the expert plays on from the state it leads to; never a training target).",
    )


class ExpertEpisode(Contract):
    """One whole expert episode, from the opening to the step that ended the game."""

    # env_gateway -> teacher_training (dataset cache)
    start: EpisodeStart = Field(description="The gateway's opening of the episode (expert action included).")
    turns: list[ExpertTurn] = Field(min_length=1, description="Every accepted step, in order.")

    @model_validator(mode="after")
    def _follows_the_expert(self) -> "ExpertEpisode":
        suggested = [self.start.expert_action, *(t.result.expert_action for t in self.turns[:-1])]
        for index, (turn, expert_action) in enumerate(zip(self.turns, suggested, strict=True)):
            if turn.detour == (turn.action == expert_action):
                raise ValueError(
                    f"turn {index}: an expert turn must play the expert action suggested just before "
                    "it, a detour any other action"
                )
        if self.turns[-1].detour:
            raise ValueError("the last turn must be the expert's")
        if any(t.result.done for t in self.turns[:-1]):
            raise ValueError("only the last turn may end the episode")
        return self

    @property
    def won(self) -> bool:
        last = self.turns[-1].result
        return last.done and last.won


class ExpertDatasetInfo(Contract):
    """What an expert dataset file holds and how it was collected (its cache key, spelled out)."""

    # teacher_training -> teacher_training (dataset cache, read by a later run)
    format: int = Field(ge=1, description="Version of the dataset layout.")
    env: str = Field(min_length=1, description="Env backend.")
    split: str = Field(min_length=1, description="Game pool.")
    seeds: list[int] = Field(min_length=1, description="The game seeds asked for, in order.")
    games: str = Field(
        min_length=1, description="What fixes the gateway's games (its game settings, as JSON)."
    )
    max_expert_turns: int = Field(ge=1, description="Longer expert episodes were dropped.")
    detour_rate: float = Field(
        0.0, ge=0.0, lt=1.0, description="Chance per turn of a random detour before the expert's action."
    )
    episodes: int = Field(ge=0, description="Won episodes stored.")
    dropped: int = Field(ge=0, description="Seeds whose expert episode did not win within the limit.")
