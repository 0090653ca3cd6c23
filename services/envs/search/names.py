"""Made-up words for the fictional encyclopedia: pronounceable, capitalised, never repeated.

Every word is unique across the whole encyclopedia, so a search for an entity's name can only
match the passages that mention that entity (no real-world knowledge helps either).
"""

import random

_ONSETS = (
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "st",
    "t",
    "th",
    "v",
    "vr",
    "z",
)
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ou")
_CODAS = ("", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk")
# Tokens the BM25 tokenizer would drop or that read as English words in questions.
_RESERVED = frozenset({"the", "and", "for", "was", "born", "city", "name", "man", "men", "tin", "ten"})


class WordMint:
    """Hands out distinct made-up words from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def word(self, syllables: tuple[int, int] = (2, 2)) -> str:
        """A new capitalised word of 2 syllables by default (no word is handed out twice)."""
        for _ in range(10_000):
            count = self._rng.randint(*syllables)
            parts = [
                self._rng.choice(_ONSETS) + self._rng.choice(_VOWELS) + self._rng.choice(_CODAS)
                for _ in range(count)
            ]
            word = "".join(parts)
            if word not in self._used and word not in _RESERVED:
                self._used.add(word)
                return word.capitalize()
        raise RuntimeError("ran out of made-up words; lower the encyclopedia sizes")
