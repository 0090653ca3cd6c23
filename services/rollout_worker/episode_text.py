"""What the model is shown of an episode: the first user message and each turn's tool observation.

Every text ends with the admissible actions (as the paper's tool returns them): a small policy
learns far more easily to pick from a list it sees than to guess commands, and rejections name
the choices too. With a task reminder (``[rollout] task_reminder``) every tool observation ends
with the task restated (``Your task is to: ...``), right before the model's next response, so a
small model copies the goal from a few tokens back instead of from the first message hundreds of
tokens away (or from its own last thought, which may have drifted). Anything that produces training text for the agent (the rollout loop, expert
demonstrations for SFT) builds it here, so the model sees the same format in training and play.

Pure module: contracts and the chat-format helpers only.
"""

from collections.abc import Sequence

from services.agent.chat_format import format_observation, task_message
from services.agent.tool_calls import ParseFailure, inadmissible_action_feedback
from services.contracts.env_gateway import EpisodeStart, StepResult

TASK_PREFIX = "Your task is to: "


def first_user_message(start: EpisodeStart, list_actions: bool = True) -> str:
    """The episode's opening observation (it states the task) and the admissible actions.

    Backends whose opening text omits the objective get it prepended, as in the paper's example.
    Envs whose protocol does not list actions (``EnvProtocol.list_actions``) pass False.
    """
    observation = format_observation(start.observation, start.admissible_actions if list_actions else None)
    if start.objective.strip() and start.objective.strip() in start.observation:
        return observation
    return task_message(TASK_PREFIX + start.objective.strip(), observation)


def task_reminder(start: EpisodeStart, enabled: bool = True) -> str | None:
    """The line that restates the episode's task at the end of each observation (None: no reminder).

    Backends with an empty objective have nothing to restate.
    """
    objective = start.objective.strip()
    return TASK_PREFIX + objective if enabled and objective else None


def _remind(observation: str, reminder: str | None) -> str:
    return f"{observation}\n{reminder}" if reminder else observation


def step_observation(result: StepResult, list_actions: bool = True, reminder: str | None = None) -> str:
    """The tool's answer to an executed action: the game's text, then the new admissible actions."""
    observation = format_observation(result.observation, result.admissible_actions if list_actions else None)
    return _remind(observation, reminder)


def invalid_call_observation(
    failure: ParseFailure, admissible: Sequence[str], list_actions: bool = True, reminder: str | None = None
) -> str:
    """The tool's answer to a response that did not parse; the game is unchanged."""
    return _remind(format_observation(failure.feedback, admissible if list_actions else None), reminder)


def inadmissible_observation(
    action: str, admissible: Sequence[str], list_actions: bool = True, reminder: str | None = None
) -> str:
    """The tool's answer to an action the game would not accept; the game is unchanged."""
    return _remind(inadmissible_action_feedback(action, admissible if list_actions else None), reminder)
