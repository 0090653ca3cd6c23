"""The scoring subset of the OpenAI-compatible ``POST /v1/completions`` (vLLM's, SGLang's), and
``GET /v1/models``, where a client reads the served model's context.

# orchestrator -> OpenAI-compatible teacher endpoint (vLLM, SGLang, or our teacher app) -> orchestrator

The request sends whole token sequences as the prompt with ``prompt_logprobs = K``: the answer
carries, for every prompt position after the first, the K most likely next tokens and the token
actually there, each with its full-vocabulary log-prob. The first position has nothing before it,
so its entry is null. The requests are ``extra="forbid"`` (our teacher app takes every field of
vLLM's request and refuses other names); the answers are read with ``extra="ignore"``, because
real servers add fields beyond this subset (``text``, ``usage``, ``routed_experts``, ...) and we
must parse what they send.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired

import pydantic_core
from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from services.contracts.base import (
    Contract,
    FiniteFloat,
    JsonBool,
    JsonInt,
    JsonNonNegInt,
    JsonPositiveInt,
    JsonTokenId,
    NonNegInt,
)

TokenIds = Annotated[list[JsonTokenId], Field(min_length=2)]
# A text prompt is what the start-up probe sends: the server tokenises it, and its
# prompt_token_ids show whether it tokenises as the student does.
PromptText = Annotated[str, Field(min_length=1, max_length=65536)]


def _unset(value: object) -> bool:
    return value is None or value is False or value == [] or value == {}


def _served_only_if(allowed: Callable[[Any], bool], why: str) -> AfterValidator:
    """A field of vLLM's request this subset serves at ``allowed`` values only: another value is
    refused, the message naming the field, the value and ``why``."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if not allowed(value):
            shown = pydantic_core.to_json(value).decode()
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise ValueError(f"{info.field_name} = {shown} cannot be honoured: {why}")
        return value

    return AfterValidator(check)


def _refused_unless_unset(why: str) -> AfterValidator:
    return _served_only_if(_unset, why)


# Why the fields below change nothing here: vLLM computes prompt log-probs from the raw logits,
# before any sampling parameter applies, and our teacher app generates no token.
_SAMPLING = "; no effect on prompt log-probs (they come from the raw logits) and this app generates no token"
_UNUSED_OUTPUT = "; no effect: it shapes an answer field this app never sends"
_SCHEDULING = "; no effect on the answer (this app scores requests in arrival order, with no prefix cache)"
_IGNORED_BY_VLLM = "; no effect (vLLM's own /v1/completions ignores it too)"


def _accepted(what: str, why: str) -> Any:
    return Field(None, description=what + why)


class CompletionRequest(Contract):
    """A scoring request: one prompt (token ids) or a batch of them, answered with prompt log-probs.

    Every field of vLLM's ``CompletionRequest`` is accepted (a client written for vLLM works
    unchanged), in three groups: those this subset honours; those it serves at their default only
    (another value would ask for an answer it does not make: a stream, generated tokens, several
    choices; refused with 422 naming the field and the value); and sampling, scheduling and output
    fields that cannot change prompt log-probs, accepted with no effect. Unlike vLLM, which ignores
    names it does not know, a name outside vLLM's request is refused (422 naming it: a typo never
    passes silently). Every added field defaults to None, so the requests we send are unchanged.
    """

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
    truncate_prompt_tokens: JsonNonNegInt | Literal[-1] | None = Field(
        None,
        description="Keep only this many tokens of each prompt (after tokenising a text), as vLLM: the "
        "last ones, or the first with truncation_side 'right'; -1: as many as the server scores "
        "(max_model_len - 1).",
    )
    truncation_side: Literal["left", "right"] | None = Field(
        None,
        description="With truncate_prompt_tokens: 'left' (the default, as vLLM's for generating models) "
        "cuts the start, 'right' the end.",
    )
    add_special_tokens: JsonBool | None = Field(
        None,
        description="Whether a text prompt is tokenised with the tokenizer's special tokens (e.g. BOS); "
        "default true, as vLLM. Token-id prompts are scored as sent.",
    )
    request_id: str | None = Field(
        None, description="The answer's id is 'cmpl-' and this (vLLM's); default a random one."
    )

    # Served at their default only (None, or the value named).
    echo: Annotated[
        JsonBool | None,
        _refused_unless_unset("this app writes no text nor `logprobs`; prompt_logprobs has the prompt's"),
    ] = Field(None, description="The prompt's text and log-probs in the text and `logprobs`: false only.")
    logprobs: Annotated[
        JsonInt | None,
        _refused_unless_unset(
            "log-probs of generated tokens, and this app generates none; use prompt_logprobs"
        ),
    ] = Field(
        None, description="Log-probs of generated tokens: refused unless null (this app generates none)."
    )
    logprob_token_ids: Annotated[
        list[JsonInt] | None,
        _refused_unless_unset("log-probs of generated tokens, and this app generates none"),
    ] = Field(None, description="Log-probs of chosen tokens at generated positions: refused unless empty.")
    n: Annotated[
        JsonPositiveInt | None,
        _served_only_if(lambda v: v is None or v == 1, "this app answers one choice per prompt"),
    ] = Field(None, description="Choices per prompt: 1 only.")
    stream: Annotated[JsonBool | None, _refused_unless_unset("this app answers in one response")] = Field(
        None, description="Default false; true is refused (the answer comes whole)."
    )
    stream_options: Annotated[dict[str, Any] | None, _refused_unless_unset("this app does not stream")] = (
        Field(None, description="Options of a stream: refused unless null.")
    )
    suffix: Annotated[str | None, _refused_unless_unset("this app scores the prompt as sent (no infill)")] = (
        Field(None, description="Text after the completion (fill-in-the-middle): refused unless null.")
    )
    use_beam_search: Annotated[
        JsonBool | None,
        _refused_unless_unset("this app does no beam search (nor does vLLM's give prompt log-probs)"),
    ] = Field(None, description="Default false; true is refused.")
    prompt_embeds: Annotated[
        str | list[str] | None, _refused_unless_unset("this app scores token ids or a text, not embeddings")
    ] = Field(None, description="Prompts as embeddings: refused unless null.")
    response_format: Annotated[
        dict[str, Any] | None,
        _served_only_if(
            lambda v: v is None or v.get("type") == "text", "this app generates no output to constrain"
        ),
    ] = Field(None, description="Structured output: refused unless null or {'type': 'text'}.")
    structured_outputs: Annotated[
        dict[str, Any] | None, _refused_unless_unset("this app generates no output to constrain")
    ] = Field(None, description="Structured output: refused unless null.")
    kv_transfer_params: Annotated[
        dict[str, Any] | None, _refused_unless_unset("this app does no disaggregated serving")
    ] = Field(None, description="KV-cache transfer (disaggregated serving): refused unless empty.")
    ec_transfer_params: Annotated[
        dict[str, Any] | None, _refused_unless_unset("this app does no disaggregated serving")
    ] = Field(None, description="Encoder-cache transfer (disaggregated serving): refused unless empty.")
    vllm_xargs: Annotated[
        dict[str, Any] | None, _refused_unless_unset("this app has no extensions to read them")
    ] = Field(None, description="Arguments of custom vLLM extensions: refused unless empty.")

    # Accepted with no effect.
    temperature: FiniteFloat | None = _accepted("Sampling temperature", _SAMPLING)
    top_p: FiniteFloat | None = _accepted("Nucleus sampling mass", _SAMPLING)
    top_k: JsonInt | None = _accepted("Top-k sampling", _SAMPLING)
    min_p: FiniteFloat | None = _accepted("Min-p sampling", _SAMPLING)
    seed: JsonInt | None = _accepted("Sampling seed", _SAMPLING)
    frequency_penalty: FiniteFloat | None = _accepted("Frequency penalty", _SAMPLING)
    presence_penalty: FiniteFloat | None = _accepted("Presence penalty", _SAMPLING)
    repetition_penalty: FiniteFloat | None = _accepted("Repetition penalty", _SAMPLING)
    length_penalty: FiniteFloat | None = _accepted("Beam-search length penalty", _SAMPLING)
    logit_bias: dict[str, FiniteFloat] | None = _accepted("Logit bias of sampled tokens", _SAMPLING)
    allowed_token_ids: list[JsonInt] | None = _accepted("Tokens sampling may choose", _SAMPLING)
    bad_words: list[str] | None = _accepted("Words sampling must avoid", _SAMPLING)
    stop: str | list[str] | None = _accepted("Stop strings", _SAMPLING)
    stop_token_ids: list[JsonInt] | None = _accepted("Stop tokens", _SAMPLING)
    include_stop_str_in_output: JsonBool | None = _accepted("Keep the stop string", _SAMPLING)
    ignore_eos: JsonBool | None = _accepted("Generate past EOS", _SAMPLING)
    min_tokens: JsonInt | None = _accepted("Fewest tokens to generate", _SAMPLING)
    skip_special_tokens: JsonBool | None = _accepted("Detokenise without special tokens", _SAMPLING)
    spaces_between_special_tokens: JsonBool | None = _accepted("Detokenisation spacing", _SAMPLING)
    watermarking: JsonBool | None = _accepted("Watermark generated tokens", _SAMPLING)
    repetition_detection: dict[str, JsonInt] | None = _accepted("Stop on repeated n-grams", _SAMPLING)
    thinking_token_budget: JsonInt | None = _accepted("Most reasoning tokens", _SAMPLING)
    return_tokens_as_token_ids: JsonBool | None = _accepted("Name generated tokens by id", _UNUSED_OUTPUT)
    routed_experts_prompt_start: JsonNonNegInt | None = _accepted("Skip routed-expert data", _UNUSED_OUTPUT)
    user: str | None = _accepted("The end user", _SCHEDULING)
    session_id: str | None = _accepted("A session's id", _SCHEDULING)
    priority: JsonInt | None = _accepted("Scheduling priority", _SCHEDULING)
    cache_salt: Annotated[str, Field(min_length=1, max_length=1024)] | None = _accepted(
        "Prefix-cache salt", _SCHEDULING
    )
    return_token_offsets: JsonBool | None = _accepted(
        "Character offsets (render endpoints)", _IGNORED_BY_VLLM
    )
    mm_payload: Literal["tensors", "none"] | None = _accepted("Multimodal render payload", _IGNORED_BY_VLLM)
    return_mm_kwargs: JsonBool | None = _accepted("Deprecated alias of mm_payload", _IGNORED_BY_VLLM)
    stream_interval: JsonPositiveInt | None = _accepted("Tokens per streamed chunk", _IGNORED_BY_VLLM)

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
