"""HTTP protocol of AgentGym's `agentenv_webshop` server, spoken by the gateway's remote webshop
adapter and by `turnopd serve webshop` (the project's own server over the generated shop).

    POST /create                     -> env_idx (int)
    POST /reset   ResetQuery         -> [observation, null]   (session_id: the goal id)
    POST /step    StepQuery          -> StepResponse
    GET  /observation?env_idx=       -> observation (str)
    GET  /available_actions?env_idx= -> AvailableActions
    GET  /instruction_text?env_idx=  -> instruction (str)
    GET  /state?env_idx=             -> StateResponse
    POST /close   CloseQuery         -> CloseResponse
    GET  /list_envs                  -> [env_idx, ...]
    GET  /                           -> "ok"
"""

from typing import Annotated

from pydantic import Field

from services.contracts.base import Contract, JsonInt, JsonNonNegInt


class ResetQuery(Contract):
    """Load a goal into an env."""

    # env_gateway (remote webshop adapter) -> webshop server
    env_idx: JsonInt = Field(description="The env, as /create returned it.")
    session_id: JsonNonNegInt | None = Field(None, description="Goal id; null draws one.")


# webshop server -> env_gateway (remote webshop adapter)
ResetResponse = Annotated[
    list[str | None],
    Field(
        min_length=2,
        max_length=2,
        description="[observation, null]. A two-item array rather than an OpenAPI 3.1 tuple "
        "(`prefixItems`), which client generators and validators (schemathesis 4.32) misread.",
    ),
]


class StepQuery(Contract):
    """Play one action (search[...] or click[...]); an impossible one changes nothing."""

    # env_gateway (remote webshop adapter) -> webshop server
    env_idx: JsonInt = Field(description="The env, as /create returned it.")
    action: str = Field(description="search[<keywords>] or click[<button>].")


class StepResponse(Contract):
    """The page after an action, its reward (non-zero only on Buy Now) and whether the episode ended."""

    # webshop server -> env_gateway (remote webshop adapter)
    state: str = Field(description="The new page as text.")
    reward: float = Field(description="The purchase score in [0, 1] on Buy Now, else 0.")
    done: bool = Field(description="The episode is over (a product was bought).")
    info: None = Field(None, description="Always null.")


class AvailableActions(Contract):
    """What the current page offers."""

    # webshop server -> env_gateway (remote webshop adapter)
    has_search_bar: bool = Field(description="search[...] is possible.")
    clickables: list[str] = Field(description="Buttons that click[...] accepts.")


class StateResponse(Contract):
    """The env's raw state."""

    # webshop server -> env_gateway (remote webshop adapter)
    url: str
    html: str
    instruction_text: str


class CloseQuery(Contract):
    # env_gateway (remote webshop adapter) -> webshop server
    env_idx: JsonInt


class CloseResponse(Contract):
    # webshop server -> env_gateway (remote webshop adapter)
    closed: bool
