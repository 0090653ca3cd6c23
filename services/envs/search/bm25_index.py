"""The embedded retriever: a BM25 index (the `bm25s` library) over Search-R1-format documents.

Title and text are indexed together, as Search-R1's BM25 indexes ``contents``; English stop
words are dropped. Passages that share no term with the query (score 0) are not returned.
"""

from collections.abc import Sequence
from typing import Any

from services.envs.search.retrieval import RetrievedPassage, Retriever, split_contents
from services.errors import InputError


class Bm25Retriever(Retriever):
    def __init__(self, documents: Sequence[tuple[str, str]]) -> None:
        """Index ``(id, contents)`` documents."""
        import bm25s

        if not documents:
            raise InputError("a BM25 index needs at least one document")
        self._bm25s: Any = bm25s
        self._passages = [(doc_id, *split_contents(contents)) for doc_id, contents in documents]
        self._index: Any = bm25s.BM25()
        self._index.index(self._tokenize([f"{t}\n{x}" for _, t, x in self._passages]), show_progress=False)

    def __len__(self) -> int:
        return len(self._passages)

    def _tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        tokens = self._bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
        return [list(t) for t in tokens]

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedPassage]]:
        if topk < 1:
            raise InputError(f"topk must be >= 1, got {topk}")
        if not queries:
            return []
        k = min(topk, len(self._passages))
        documents, scores = self._index.retrieve(self._tokenize(queries), k=k, show_progress=False)
        results = []
        for row, row_scores in zip(documents.tolist(), scores.tolist(), strict=True):
            hits = [(int(d), float(s)) for d, s in zip(row, row_scores, strict=True) if s > 0.0]
            results.append([RetrievedPassage(*self._passages[d], score=s) for d, s in hits])
        return results

    def close(self) -> None:
        """An in-memory index holds no connections."""
