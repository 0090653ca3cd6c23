"""Answer scoring of the search env: exact match after the standard QA normalisation (SQuAD's, as
Search-R1 uses it): lower case, punctuation removed, the articles a/an/the dropped, whitespace
collapsed."""

import re
import string
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """'The  Kessrow Press.' -> 'kessrow press'."""
    lowered = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def exact_match(prediction: str, golden_answers: Iterable[str]) -> bool:
    """Whether the normalised prediction equals any normalised gold answer."""
    wanted = normalize_answer(prediction)
    return any(wanted == normalize_answer(gold) for gold in golden_answers)
