"""The search env's expert: the gold retrieval chain, driven by what the searches returned (pure).

It searches for the first entity of the question's chain whose passage no search has returned
yet, and answers once every passage of the chain has been shown. Each entity it searches for is
named in the question or in a passage already shown, so its policy is learnable from the
observations alone.
"""

from collections.abc import Iterable

from services.envs.search.actions import answer_action, search_action
from services.envs.search.questions import Question


class SearchExpert:
    def __init__(self, question: Question) -> None:
        self._question = question
        self._seen: set[str] = set()

    def observe(self, titles: Iterable[str]) -> None:
        """Titles of the passages a search returned."""
        self._seen.update(titles)

    def next_action(self) -> str:
        missing = [name for name in self._question.chain if name not in self._seen]
        return search_action(missing[0]) if missing else answer_action(self._question.answer)
