"""The shop's search engine: Okapi BM25 over each product's title, type, attributes, options and
category path (WebShop ranks with a BM25 index too, and shows the top 50).

    score(q, d) = sum_{w in q} idf(w) * tf(w, d) * (k1 + 1) / (tf(w, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(w) = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5))

Ties keep catalogue order, so a query always gives the same ranking. Pure module.
"""

import math
from collections import Counter

from services.envs.webshop.catalogue import Product
from services.envs.webshop.scoring import words


def product_document(product: Product) -> str:
    """The indexed text of a product."""
    values = " ".join(v for _, vs in product.options for v in vs)
    return " ".join([product.title, product.product_type, *product.attributes, values, *product.path])


class SearchEngine:
    def __init__(self, documents: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        self._k1, self._b = k1, b
        tokenised = [words(d) for d in documents]
        self._lengths = [len(t) for t in tokenised]
        self._avg_length = sum(self._lengths) / max(1, len(tokenised))
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for index, tokens in enumerate(tokenised):
            for word, count in Counter(tokens).items():
                self._postings.setdefault(word, []).append((index, count))
        n = len(tokenised)
        self._idf = {w: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for w, p in self._postings.items()}

    def search(self, query: str, limit: int) -> list[int]:
        """Indices of the best ``limit`` documents sharing a word with the query, best first."""
        scores: dict[int, float] = {}
        k1, b, avg = self._k1, self._b, self._avg_length
        for word in dict.fromkeys(words(query)):
            idf = self._idf.get(word)
            if idf is None:
                continue
            for index, tf in self._postings[word]:
                norm = tf + k1 * (1 - b + b * self._lengths[index] / avg)
                scores[index] = scores.get(index, 0.0) + idf * tf * (k1 + 1) / norm
        ranked = sorted(scores, key=lambda i: (-scores[i], i))
        return ranked[:limit]
