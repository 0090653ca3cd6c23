from services.agent.tool_calls import ParseFailure, parse_response
from services.contracts.env_gateway import EpisodeStart, StepResult
from services.rollout_worker.episode_text import (
    first_user_message,
    inadmissible_observation,
    invalid_call_observation,
    step_observation,
    task_reminder,
)

ADMISSIBLE = ["go to desk 1", "look"]


def start_with(observation: str) -> EpisodeStart:
    return EpisodeStart(
        episode_id="e",
        observation=observation,
        objective="put some pen on drawer.",
        admissible_actions=ADMISSIBLE,
        task_type="pick_and_place",
        game_id="valid_unseen/pick_and_place/0",
        seed=0,
    )


def arrival() -> StepResult:
    """An executed step: the agent arrived at desk 1 and can only look."""
    return StepResult(
        observation="You arrive at desk 1.",
        reward=0.0,
        done=False,
        won=False,
        admissible_actions=["look"],
        turn=1,
    )


def test_first_message_is_the_opening_with_admissible_actions_and_states_the_task_once():
    opening = "You are in a room.\n\nYour task is to: put some pen on drawer."
    assert first_user_message(start_with(opening)) == opening + "\nAdmissible actions: go to desk 1, look."
    without_task = first_user_message(start_with("You are in a room."))
    assert without_task == (
        "Your task is to: put some pen on drawer.\n\nYou are in a room.\nAdmissible actions: go to desk 1, look."
    )


def test_observations_end_with_the_admissible_actions():
    result = arrival()
    assert step_observation(result) == "You arrive at desk 1.\nAdmissible actions: look."
    failure = parse_response("hello")
    assert isinstance(failure, ParseFailure)
    text = invalid_call_observation(failure, ADMISSIBLE)
    assert text.startswith("Invalid tool call: no <tool_call> block found.")
    assert text.endswith("Admissible actions: go to desk 1, look.")
    assert inadmissible_observation("fly", ADMISSIBLE) == (
        'Nothing happens. "fly" is not an admissible action here. Admissible actions: go to desk 1, look.'
    )


def test_a_task_reminder_ends_every_observation_with_the_task_restated():
    start = start_with("You are in a room.")
    reminder = task_reminder(start)
    assert reminder == "Your task is to: put some pen on drawer."
    assert task_reminder(start, enabled=False) is None
    assert task_reminder(start.model_copy(update={"objective": "  "})) is None  # nothing to restate
    result = arrival()
    assert step_observation(result, reminder=reminder) == (
        "You arrive at desk 1.\nAdmissible actions: look.\nYour task is to: put some pen on drawer."
    )
    assert step_observation(result, reminder=None) == step_observation(result)
    failure = parse_response("hello")
    assert isinstance(failure, ParseFailure)
    rejected = invalid_call_observation(failure, ADMISSIBLE, reminder=reminder)
    assert rejected == invalid_call_observation(failure, ADMISSIBLE) + "\n" + reminder
    assert inadmissible_observation("fly", ADMISSIBLE, reminder=reminder) == (
        'Nothing happens. "fly" is not an admissible action here. Admissible actions: go to desk 1, look.\n'
        "Your task is to: put some pen on drawer."
    )
    # protocols that list no actions still get the reminder
    assert step_observation(result, list_actions=False, reminder=reminder) == (
        "You arrive at desk 1.\nYour task is to: put some pen on drawer."
    )
