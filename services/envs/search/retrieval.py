"""Retrieval for the search env: the retriever interface, and how results are shown to the agent.

Results are rendered as Search-R1 renders them: ``Doc i(Title: <title>) <text>`` lines inside
``<information>...</information>``. Documents travel in Search-R1's corpus format, whose
``contents`` is the (quoted) title, a newline, then the text.
"""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from services.errors import TurnOPDError

NO_RESULTS = "No passage matches the query."


class RetrievalError(TurnOPDError, RuntimeError):
    """The retriever failed (server down, too slow, an error answer, a malformed answer)."""


@dataclass(frozen=True)
class RetrievedPassage:
    id: str
    title: str
    text: str
    score: float


def split_contents(contents: str) -> tuple[str, str]:
    """Search-R1 ``contents`` -> (title without its quotes, text)."""
    title, _, text = contents.partition("\n")
    return title.strip().strip('"'), " ".join(text.split())


def corpus_contents(title: str, text: str) -> str:
    """(title, text) -> Search-R1 ``contents``."""
    return f'"{title}"\n{text}'


def information_block(passages: Sequence[RetrievedPassage]) -> str:
    """What a search returns to the agent."""
    lines = [f"Doc {i}(Title: {p.title}) {p.text}" for i, p in enumerate(passages, start=1)]
    return "<information>" + ("\n".join(lines) if lines else NO_RESULTS) + "</information>"


class Retriever(ABC):
    """Top-k passages for a batch of queries."""

    @abstractmethod
    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedPassage]]:
        """One best-first list of at most ``topk`` passages per query; RetrievalError on failure."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""
