"""Each env's tool and system prompt."""

from pathlib import Path

from services.agent.chat_format import ALFWORLD_SYSTEM_PROMPT, ChatFormat
from services.agent.env_profiles import WEBSHOP_SYSTEM_PROMPT, chat_for_env
from services.agent.tool_calls import ALFWORLD_STEP, WEBSHOP_STEP
from services.models.loading import load_tokenizer


def test_webshop_gets_its_tool_and_prompt_and_household_envs_keep_theirs(zoo_cache: Path):
    chat = ChatFormat(load_tokenizer("student", zoo_cache))
    shop = chat_for_env(chat, "webshop")
    assert shop.tool == WEBSHOP_STEP and shop.system_prompt == WEBSHOP_SYSTEM_PROMPT
    assert shop.tokenizer is chat.tokenizer
    prompt = shop.prompt_text("WebShop [SEP] Instruction: [SEP] i need a hat [SEP] Search")
    assert "webshop_step" in prompt and "alfworld_step" not in prompt
    for env in ("alfworld", "textworld"):
        same = chat_for_env(chat, env)
        assert same.tool == ALFWORLD_STEP and same.system_prompt == ALFWORLD_SYSTEM_PROMPT
