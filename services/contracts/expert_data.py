"""Expert demonstrations: episodes the env gateway's expert played, as the gateway returned them.

They are stored (one JSON line per episode) in the dataset cache and read back by later
`turnopd teacher train` runs. Keeping the gateway's own messages, rather than rendered text,
lets training render them exactly as the agent loop renders play.
"""

from pydantic import Field, model_validator

from services.contracts.base import Contract
from services.contracts.env_gateway import EpisodeStart, StepResult


class ExpertTurn(Contract):
    """One expert action and the gateway's answer to it."""

    # env_gateway -> teacher_training (dataset cache)
    action: str = Field(min_length=1, description="The expert's action, as the gateway suggested it.")
    result: StepResult = Field(description="The gateway's answer to the action.")


class ExpertEpisode(Contract):
    """One whole expert episode, from the opening to the step that ended the game."""

    # env_gateway -> teacher_training (dataset cache)
    start: EpisodeStart = Field(description="The gateway's opening of the episode (expert action included).")
    turns: list[ExpertTurn] = Field(min_length=1, description="Every accepted step, in order.")

    @model_validator(mode="after")
    def _follows_the_expert(self) -> "ExpertEpisode":
        suggested = [self.start.expert_action, *(t.result.expert_action for t in self.turns[:-1])]
        taken = [t.action for t in self.turns]
        if suggested != taken:
            raise ValueError("every action must be the expert action suggested just before it")
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
    episodes: int = Field(ge=0, description="Won episodes stored.")
    dropped: int = Field(ge=0, description="Seeds whose expert episode did not win within the limit.")
