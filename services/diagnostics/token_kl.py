"""Where a student's reverse KL to its teacher sits among the tokens it wrote.

A household response is mostly the thought before it copied; the tokens that are new against the
response before (``new_token_spans``, the same diff the teacher's training weighs) carry the
decisions. Given per-position KLs on a played trajectory, this splits them into *novel* and
*copied* response tokens, and marks the tool call (from ``<tool_call>`` on), so a checkpoint's
progress on the decisions can be read apart from its progress on copying.

``kl_N[p]`` is the KL of the prediction made at position ``p``, that is of token ``p + 1``.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from services.agent.tool_calls import TOOL_CALL_OPEN
from services.teacher_training.rendering import new_token_spans

CLASSES = ("novel", "copied", "call", "all")


@dataclass(frozen=True)
class ResponseToken:
    """One response token of a trajectory: its position, and which classes it belongs to."""

    position: int
    novel: bool
    in_call: bool


@dataclass
class ClassKL:
    """Summed KL and token count of one class."""

    total: float = 0.0
    tokens: int = 0

    @property
    def mean(self) -> float:
        return self.total / self.tokens if self.tokens else 0.0


def call_offset(response_ids: Sequence[int], decode: Callable[[list[int]], str]) -> int:
    """Index of the first token of ``response_ids`` whose text reaches the ``<tool_call>`` tag
    (``len(response_ids)`` when there is none)."""
    cut = decode(list(response_ids)).find(TOOL_CALL_OPEN)
    if cut < 0:
        return len(response_ids)
    for i in range(len(response_ids)):
        if len(decode(list(response_ids[: i + 1]))) > cut:
            return i
    return len(response_ids)


def response_tokens(
    token_ids: Sequence[int], spans: Iterable[tuple[int, int]], decode: Callable[[list[int]], str]
) -> list[ResponseToken]:
    """The response tokens of a trajectory (``spans``: each turn's [start, end) in ``token_ids``, in
    order), each marked novel against the response before it and in or out of the tool call."""
    out: list[ResponseToken] = []
    previous: Sequence[int] = []
    for start, end in spans:
        if not 0 < start <= end <= len(token_ids):
            raise ValueError(f"response span [{start}, {end}) is outside the {len(token_ids)} token ids")
        current = token_ids[start:end]
        novel = {p for a, b in new_token_spans(previous, current, start) for p in range(a, b)}
        call_from = start + call_offset(current, decode)
        out.extend(ResponseToken(p, p in novel, p >= call_from) for p in range(start, end))
        previous = current
    return out


def kl_by_class(kl_N: Sequence[float], tokens: Iterable[ResponseToken], into: dict[str, ClassKL]) -> None:
    """Add each response token's KL (``kl_N[position - 1]``, the prediction of that token) to its
    classes in ``into`` (keys: ``CLASSES``)."""
    for token in tokens:
        value = float(kl_N[token.position - 1])
        names = ["novel" if token.novel else "copied", "all"] + (["call"] if token.in_call else [])
        for name in names:
            into[name].total += value
            into[name].tokens += 1


def empty_classes() -> dict[str, ClassKL]:
    return {name: ClassKL() for name in CLASSES}
