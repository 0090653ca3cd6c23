"""The scoring subset of the OpenAI-compatible ``POST /v1/completions`` (vLLM's, SGLang's), and
``GET /v1/models``, where a client reads the served model's context.

# orchestrator -> OpenAI-compatible teacher endpoint (vLLM, SGLang, or our teacher app) -> orchestrator

The request sends whole token sequences as the prompt with ``prompt_logprobs = K``: the answer
carries, for every prompt position after the first, the K most likely next tokens and the token
actually there, each with its full-vocabulary log-prob. The first position has nothing before it,
so its entry is null. The requests we send are ``extra="forbid"``; the answers are read with
``extra="ignore"``, because real servers add fields beyond this subset (``text``, ``usage``,
``routed_experts``, ...) and we must parse what they send.
"""

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from services.contracts.base import (
    Contract,
    FiniteFloat,
    JsonBool,
    JsonNonNegInt,
    JsonPositiveInt,
    JsonTokenId,
    NonNegInt,
)

TokenIds = Annotated[list[JsonTokenId], Field(min_length=2)]
# A text prompt is what the start-up probe sends: the server tokenises it, and its
# prompt_token_ids show whether it tokenises as the student does.
PromptText = Annotated[str, Field(min_length=1, max_length=65536)]


class CompletionRequest(Contract):
    """A scoring request: one prompt (token ids) or a batch of them, answered with prompt log-probs."""

    model: str | None = Field(None, description="The served model name (vLLM: --served-model-name).")
    prompt: PromptText | TokenIds | Annotated[list[TokenIds], Field(min_length=1)] = Field(
        description="Token ids of one sequence, a list of sequences (one choice each, by index), or one "
        "text, tokenised by the server (with return_token_ids, the answer says how)."
    )
    prompt_logprobs: JsonPositiveInt = Field(
        description="K: top log-probs returned per prompt position (vLLM caps it at --max-logprobs)."
    )
    max_tokens: JsonNonNegInt = Field(
        1, le=1, description="Tokens to generate; scoring needs none (vLLM wants at least 1)."
    )
    return_token_ids: JsonBool | None = Field(
        None, description="Ask for choices[].prompt_token_ids (vLLM); our teacher app always sends them."
    )

    @property
    def prompts(self) -> list[list[int]]:
        """The token-id prompts as a batch, also when one sequence was sent (a text prompt has none
        until the server tokenises it)."""
        if isinstance(self.prompt, str):
            raise ValueError("a text prompt has no token ids until the server tokenises it")
        batch: list[list[int]] = []
        single: list[int] = []
        for item in self.prompt:
            if isinstance(item, list):
                batch.append(item)
            else:
                single.append(item)
        return batch or [single]


class PromptLogprob(TypedDict):
    """One token's entry at one prompt position (vLLM's ``Logprob``, JSON-serialised). A typed dict,
    not a model: an answer holds K+1 of them per position, and validating them as dicts is ~4x
    cheaper than building as many model objects (bench/teacher_throughput.py)."""

    logprob: Annotated[FiniteFloat, Field(description="Full-vocabulary log-softmax of the token here.")]
    rank: NotRequired[Annotated[int | None, Field(description="1 = most likely; None: not known.")]]
    decoded_token: NotRequired[str | None]


# One prompt position: token id -> its entry; the K most likely plus the token actually there.
PositionLogprobs = dict[int, PromptLogprob]


class CompletionChoice(Contract):
    """The answer for one prompt of the batch."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: NonNegInt = Field(description="Which prompt of the batch this answers.")
    text: str = ""
    finish_reason: str | None = None
    prompt_logprobs: list[PositionLogprobs | None] | None = Field(
        None, description="Per prompt position; position 0 is null (nothing precedes it)."
    )
    prompt_token_ids: list[NonNegInt] | None = Field(
        None, description="The prompt as the server tokenised it (vLLM: with return_token_ids)."
    )


class CompletionUsage(Contract):
    model_config = ConfigDict(frozen=True, extra="ignore")

    prompt_tokens: NonNegInt = 0
    completion_tokens: NonNegInt | None = 0
    total_tokens: NonNegInt = 0


class CompletionResponse(Contract):
    """The server's answer: one choice per prompt."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = ""
    object: Literal["text_completion"] = "text_completion"
    created: NonNegInt = 0
    model: str = ""
    choices: list[CompletionChoice]
    usage: CompletionUsage | None = None


class ModelCard(Contract):
    """One served model (vLLM's ``ModelCard``: the fields a scoring client reads)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(description="The served model name, as requests give it in `model`.")
    object: Literal["model"] = "model"
    created: NonNegInt = 0
    owned_by: str = "turnopd"
    max_model_len: JsonPositiveInt | None = Field(
        None,
        description="One more than the longest prompt the server scores (vLLM counts the one token "
        "it must generate).",
    )


class ModelList(Contract):
    """``GET /v1/models``: the models the server serves."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    object: Literal["list"] = "list"
    data: list[ModelCard]
