"""The chat format of an episode and its incremental tokenisation with per-turn response spans.

A conversation is (paper, Appendix "Environments, Tool Configurations, And Task Examples")::

    system     the agent's instructions, plus the tool schema (rendered by the chat template)
    user       the task objective and the environment's first observation
    then, per turn t = 0, 1, ...:
    assistant  the model's response: optional <think>...</think>, then one <tool_call>
    tool       the tool's observation (or the client-side rejection feedback, see tool_calls)

Rendering uses the tokenizer's own chat template (ChatML as in Qwen3: ``<|im_start|>role ...
<|im_end|>``; tool messages become ``<tool_response>`` blocks in a user turn), so real Qwen3
checkpoints and the tiny zoo share this code.

Token ids are built incrementally and only ever appended: the prompt is rendered once; each
response is appended exactly as the sampler produced it (never re-tokenised, so the sampler's
log-probs stay aligned with the ids); each observation is appended as the template's text between
one assistant message and the next generation prompt, tokenised on its own. Every piece starts or
ends at a control token, so the ids equal a tokenisation of the whole rendered text, and the ids
of earlier turns never change when a turn is added.

Only assistant-response tokens are supervised: ``response_spans[t] = (start, end)`` is the
half-open range of turn t's sampled tokens in ``token_ids``, including the ``<|im_end|>`` the
model emitted to stop. Template and observation tokens (and an ``<|im_end|>`` the worker appended
after a response cut off by the token limit) lie outside every span.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.agent.tool_calls import ALFWORLD_STEP, ToolSpec
from services.errors import ConflictError, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

END_OF_TURN = "<|im_end|>"

ALFWORLD_SYSTEM_PROMPT = (
    "You are an AI agent operating in a household environment. You can interact with objects and "
    "navigate between locations using the alfworld_step tool. Think step by step inside "
    "<think></think>, then call the tool exactly once per turn."
)

# A marker that no template rewrites; used to find where one assistant message ends.
_STUB_RESPONSE = "<think>\nturnopd-stub\n</think>\n\nturnopd-stub"

Message = dict[str, Any]


def task_message(objective: str, observation: str) -> str:
    """The first user message: the task objective, then the environment's first observation."""
    return f"{objective.strip()}\n\n{observation.strip()}"


def format_observation(observation: str, admissible: Sequence[str] | None = None) -> str:
    """A tool observation, optionally followed by the admissible actions (as the paper's tool does)."""
    text = observation.strip()
    if admissible:
        text += "\nAdmissible actions: " + ", ".join(admissible) + "."
    return text


def initial_messages(system_prompt: str, user_message: str) -> list[Message]:
    """The messages before the first turn."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_message}]


def _render(tokenizer: "PreTrainedTokenizerBase", messages: list[Message], **kwargs: Any) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    if not isinstance(text, str):
        raise InputError(f"chat template rendered {type(text).__name__}, expected text")
    return text


def _encode(tokenizer: "PreTrainedTokenizerBase", text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def end_of_turn_id(tokenizer: "PreTrainedTokenizerBase") -> int:
    """The id of ``<|im_end|>``, which ends every message and stops generation."""
    token_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise InputError(f"tokenizer has no {END_OF_TURN} token; it is not a ChatML (Qwen-style) tokenizer")
    return token_id


@dataclass(frozen=True)
class ChatFormat:
    """How one tokenizer renders an episode: the tool, the system prompt, template kwargs."""

    tokenizer: "PreTrainedTokenizerBase"
    tool: ToolSpec = ALFWORLD_STEP
    system_prompt: str = ALFWORLD_SYSTEM_PROMPT

    def prompt_text(self, user_message: str) -> str:
        """System + first user message + the first generation prompt, as text."""
        return _render(
            self.tokenizer,
            initial_messages(self.system_prompt, user_message),
            tools=[self.tool.json_schema()],
            add_generation_prompt=True,
        )

    def observation_text(self, observation: str) -> str:
        """The template text from the end of a response to the next generation prompt."""
        messages = [
            {"role": "user", "content": "turnopd-stub"},
            {"role": "assistant", "content": _STUB_RESPONSE},
            {"role": "tool", "content": observation},
        ]
        text = _render(self.tokenizer, messages, add_generation_prompt=True)
        marker = text.rfind(_STUB_RESPONSE)
        end = text.find(END_OF_TURN, marker) if marker >= 0 else -1
        if end < 0:
            raise InputError("chat template does not render an assistant message verbatim before <|im_end|>")
        return text[end + len(END_OF_TURN) :]

    def full_text(self, user_message: str, turns: Sequence[tuple[str, str | None]]) -> str:
        """The whole conversation rendered in one call (responses as text); for checks and display.

        Only the last turn may lack an observation; the text then ends at that response's <|im_end|>.
        """
        messages = initial_messages(self.system_prompt, user_message)
        for response, observation in turns:
            messages.append({"role": "assistant", "content": response})
            if observation is not None:
                messages.append({"role": "tool", "content": observation})
        ends_with_response = bool(turns) and turns[-1][1] is None
        text = _render(
            self.tokenizer,
            messages,
            tools=[self.tool.json_schema()],
            add_generation_prompt=not ends_with_response,
        )
        return text[: text.rfind(END_OF_TURN) + len(END_OF_TURN)] if ends_with_response else text

    def start(self, user_message: str) -> "Conversation":
        """A conversation holding the prompt ids, ready for the first response."""
        prompt = _encode(self.tokenizer, self.prompt_text(user_message))
        return Conversation(self, prompt)


class Conversation:
    """Token ids of one episode, appended turn by turn, with each response's span."""

    def __init__(self, chat: ChatFormat, prompt_ids: list[int]) -> None:
        self.chat = chat
        self._ids = list(prompt_ids)
        self.prompt_length = len(prompt_ids)
        self.response_spans: list[tuple[int, int]] = []
        self._awaiting_response = True
        self._end_of_turn = end_of_turn_id(chat.tokenizer)

    @property
    def token_ids(self) -> list[int]:
        """All ids so far (a copy). While awaiting a response, this is the generation prompt."""
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def num_turns(self) -> int:
        return len(self.response_spans)

    @property
    def awaiting_response(self) -> bool:
        return self._awaiting_response

    def add_response_ids(self, response_ids: Sequence[int]) -> tuple[int, int]:
        """Append a sampled response verbatim; return its span. A cut-off response gets an <|im_end|>."""
        if not self._awaiting_response:
            raise ConflictError("a response was already added for this turn; add the observation first")
        if not response_ids:
            raise InputError("a response must hold at least one token")
        start = len(self._ids)
        self._ids.extend(int(t) for t in response_ids)
        span = (start, len(self._ids))
        if self._ids[-1] != self._end_of_turn:
            self._ids.append(self._end_of_turn)  # template token: outside the span, never supervised
        self.response_spans.append(span)
        self._awaiting_response = False
        return span

    def add_response_text(self, response: str) -> tuple[int, int]:
        """Append a response given as text (e.g. an expert's), ending with <|im_end|>; return its span."""
        ids = [*_encode(self.chat.tokenizer, response), self._end_of_turn]
        return self.add_response_ids(ids)

    def add_observation(self, observation: str, max_length: int | None = None) -> bool:
        """Append the tool's observation for the last response and the next generation prompt; with
        ``max_length``, only if the conversation then holds at most that many ids. False: it would
        not fit and nothing was appended (the conversation ends at the last response)."""
        if self._awaiting_response:
            raise ConflictError("the turn has no response yet; add the response before its observation")
        ids = _encode(self.chat.tokenizer, self.chat.observation_text(observation))
        if max_length is not None and len(self._ids) + len(ids) > max_length:
            return False
        self._ids.extend(ids)
        self._awaiting_response = True
        return True

    def response_ids(self, turn: int) -> list[int]:
        """The sampled ids of one turn's response."""
        start, end = self.response_spans[turn]
        return self._ids[start:end]

    def response_text(self, response_ids: Sequence[int]) -> str:
        """Decode a response for parsing, without its closing <|im_end|>."""
        ids = list(response_ids)
        if ids and ids[-1] == self._end_of_turn:
            ids = ids[:-1]
        text = self.chat.tokenizer.decode(ids, skip_special_tokens=False)
        return str(text)
