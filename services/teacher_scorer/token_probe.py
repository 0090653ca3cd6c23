"""Does a teacher endpoint tokenise as the student does? Top-K distillation compares token ids, so a
server whose ids mean other strings would teach nonsense without any error.

At start-up the endpoint client sends a probe text (words, digits, punctuation, non-ASCII, and every
special token the student's tokenizer adds, the chat markers among them) and compares the ids the
server made of it (``prompt_token_ids``) with the student's; the ids the server returns in its
top-K must also exist in the student's vocabulary. Pure: the tokenizer is read through its
methods, nothing here loads one.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Plain text in the shapes a game transcript has; the student's special tokens are added to it.
PROBE_TEXT = (
    "You are in a kitchen. On the counter: 2 apples, a knife and 13.5 g of salt!\n"
    "> take apple from counter\n  You take the apple.\t(Score: +1) «déjà vu» 東京 ✓"
)
# A tokenizer with many added tokens (reserved slots) is probed with its first ones.
MAX_PROBED_SPECIAL_TOKENS = 64


@dataclass(frozen=True)
class StudentTokens:
    """The student's side of the probe: its tokenizer's name, the text and the ids it makes of it."""

    tokenizer: str  # how the config names the student's tokenizer, and where it was read from
    text: str
    token_ids: tuple[int, ...]
    pieces: tuple[str, ...]  # the string of each of token_ids, for the error message
    vocab_size: int  # ids the student's tokenizer knows: [0, vocab_size)


def student_tokens(tokenizer: Any, name: str) -> StudentTokens:
    """The probe as the student's tokenizer (a ``transformers`` tokenizer) reads it: ``PROBE_TEXT``
    then its added special tokens, tokenised as a vLLM server does (``tokenizer(text)``)."""
    added = sorted(tokenizer.get_added_vocab().items(), key=lambda kv: kv[1])[:MAX_PROBED_SPECIAL_TOKENS]
    text = PROBE_TEXT + "\n" + "".join(token for token, _ in added)
    ids = tuple(int(i) for i in tokenizer(text)["input_ids"])
    pieces = tuple(str(p) for p in tokenizer.convert_ids_to_tokens(list(ids)))
    return StudentTokens(tokenizer=name, text=text, token_ids=ids, pieces=pieces, vocab_size=len(tokenizer))


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    """The first index where two id sequences differ (the shorter's length when one extends the other)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def tokenizer_mismatch(
    student: StudentTokens, endpoint: str, endpoint_ids: Sequence[int], top_ids: Iterable[int]
) -> str | None:
    """What differs between the student's tokenizer and the endpoint's (``endpoint``: how to name it)
    on the probe, or None when nothing does. ``endpoint_ids``: its ``prompt_token_ids`` of the probe
    text; ``top_ids``: every token id its prompt log-probs named."""
    both = f"the student's tokenizer {student.tokenizer} and {endpoint}"
    if list(endpoint_ids) != list(student.token_ids):
        at = first_difference(endpoint_ids, student.token_ids)
        mine = (
            f"{student.token_ids[at]} ({student.pieces[at]!r})" if at < len(student.token_ids) else "nothing"
        )
        theirs = str(endpoint_ids[at]) if at < len(endpoint_ids) else "nothing"
        return (
            f"{both} tokenise the probe text differently: {len(student.token_ids)} tokens against "
            f"{len(endpoint_ids)}, first difference at token {at}: the student has {mine}, the endpoint "
            f"{theirs}. Serve the teacher with the student's tokenizer (vLLM: --tokenizer <student "
            "checkpoint>); cross-tokenizer distillation is not supported"
        )
    beyond = sorted({i for i in top_ids if i >= student.vocab_size})
    if beyond:
        return (
            f"{both} have different vocabularies: the endpoint returns token ids up to {beyond[-1]} "
            f"({len(beyond)} at or beyond {student.vocab_size}), the student's tokenizer has "
            f"{student.vocab_size} tokens. Serve the teacher with the student's tokenizer"
        )
    return None
