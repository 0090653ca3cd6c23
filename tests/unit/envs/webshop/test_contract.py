"""The agentenv_webshop protocol messages: JSON round trips, and AgentGym's own bodies validate."""

import pytest
from pydantic import ValidationError

from services.envs.webshop.contract import (
    AvailableActions,
    CloseQuery,
    CloseResponse,
    ResetQuery,
    StateResponse,
    StepQuery,
    StepResponse,
)

EXAMPLES = [
    ResetQuery(env_idx=3, session_id=205),
    ResetQuery(env_idx=3),
    StepQuery(env_idx=3, action="click[Buy Now]"),
    StepResponse(state="Thank you for shopping with us!", reward=0.75, done=True),
    AvailableActions(has_search_bar=False, clickables=["back to search", "b0abcdef12"]),
    StateResponse(url="webshop://3/item", html="...", instruction_text="i need a hat"),
    CloseQuery(env_idx=3),
    CloseResponse(closed=True),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message):
    assert type(message).model_validate_json(message.model_dump_json()) == message


def test_agentgym_step_answer_validates_and_extra_fields_do_not():
    raw = '{"state": "page", "reward": 0.0, "done": false, "info": null}'
    assert StepResponse.model_validate_json(raw) == StepResponse(state="page", reward=0.0, done=False)
    with pytest.raises(ValidationError):
        StepQuery.model_validate({"env_idx": 1, "action": "search[x]", "extra": 1})
    with pytest.raises(ValidationError):
        ResetQuery(env_idx=1, session_id=-1)
