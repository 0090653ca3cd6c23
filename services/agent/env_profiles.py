"""Which tool and system prompt the agent gets in each env (paper, Appendix "Environments, Tool
Configurations, And Task Examples"): household games use ``alfworld_step``, WebShop uses
``webshop_step``. Every place that renders an episode (the agent loop, expert demonstrations)
picks the chat format here, so play and training text agree.
"""

from dataclasses import replace

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import WEBSHOP_STEP

WEBSHOP_SYSTEM_PROMPT = (
    "You are an AI agent shopping on a website with the webshop_step tool. Find the product the "
    "instruction asks for (type, attributes, options, price): search[<keywords>] on the search page, "
    "click[<button>] to open a product, choose its options and finally click[Buy Now]. Think step by "
    "step inside <think></think>, then call the tool exactly once per turn."
)


def chat_for_env(chat: ChatFormat, env: str) -> ChatFormat:
    """``chat`` with the env's tool and system prompt (household envs keep the default one)."""
    match env:
        case "webshop":
            return replace(chat, tool=WEBSHOP_STEP, system_prompt=WEBSHOP_SYSTEM_PROMPT)
        case _:
            return chat
