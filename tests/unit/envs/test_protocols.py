"""Each env's tool and system prompt."""

from pathlib import Path

import pytest

from services.agent.chat_format import ALFWORLD_SYSTEM_PROMPT, ChatFormat
from services.agent.tool_calls import ALFWORLD_STEP, WEBSHOP_STEP, ParsedAction
from services.envs.protocols import WEBSHOP_SYSTEM_PROMPT, env_protocol
from services.models.loading import load_tokenizer


def test_webshop_gets_its_tool_and_prompt_and_household_envs_keep_theirs(zoo_cache: Path):
    chat = ChatFormat(load_tokenizer("student", zoo_cache))
    protocol = env_protocol("webshop")
    shop = protocol.chat(chat)
    assert shop.tool == WEBSHOP_STEP and shop.system_prompt == WEBSHOP_SYSTEM_PROMPT
    assert shop.tokenizer is chat.tokenizer
    prompt = shop.prompt_text("WebShop [SEP] Instruction: [SEP] i need a hat [SEP] Search")
    assert "webshop_step" in prompt and "alfworld_step" not in prompt
    response = protocol.respond("click[Buy Now]", "it fits")
    assert protocol.parse(response) == ParsedAction(action="click[Buy Now]", thought="it fits")
    for env in ("alfworld", "textworld"):
        same = env_protocol(env).chat(chat)
        assert same.tool == ALFWORLD_STEP and same.system_prompt == ALFWORLD_SYSTEM_PROMPT


def test_unknown_env_has_no_protocol():
    with pytest.raises(ValueError, match="no agent protocol for env 'minecraft'"):
        env_protocol("minecraft")
