"""WebShop's purchase reward (Yao et al., 2022), written from the paper's definition:

    reward = r_type * (attribute matches + option matches + [price <= bound])
                    / (goal attributes + goal options + 1)

* ``r_type`` is 1 when the bought product has the goal's type (same search query, or at least two
  shared category-path levels, or more than 20% of the type's words in its title), 0.5 otherwise,
  0.1 when under 10% of the type words are in the title, and 0 when none is. WebShop takes the type
  words from a parser's nouns of the target title; here they are the words of the product type.
* a goal attribute matches when one of the product's attributes fuzzily equals it (token-set
  ratio > 85), or it appears verbatim in the title, features or description;
* a goal option matches when one of the chosen option values fuzzily equals it (ratio > 85).

Success is a reward of exactly 1. Pure module: standard library only.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher

from services.envs.webshop.catalogue import Product
from services.envs.webshop.goals import Goal

FUZZY_MATCH = 85
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class PurchaseScore:
    reward: float
    r_type: float
    attribute_matches: int
    option_matches: int
    price_ok: bool

    @property
    def success(self) -> bool:
        return self.reward >= 1.0


def words(text: str) -> list[str]:
    """Lower-case alphanumeric tokens."""
    return _WORD.findall(text.lower())


def _ratio(a: str, b: str) -> int:
    return round(100 * SequenceMatcher(None, a, b, autojunk=False).ratio()) if a or b else 0


def token_set_ratio(a: str, b: str) -> int:
    """Similarity 0..100 of two phrases as word sets: 100 when one set contains the other."""
    left, right = set(words(a)), set(words(b))
    shared = " ".join(sorted(left & right))
    with_left = f"{shared} {' '.join(sorted(left - right))}".strip()
    with_right = f"{shared} {' '.join(sorted(right - left))}".strip()
    return max(_ratio(shared, with_left), _ratio(shared, with_right), _ratio(with_left, with_right))


def type_reward(product: Product, goal: Goal) -> float:
    query_match = product.product_type == goal.product_type
    category_match = len(set(product.path) & set(goal.path)) >= 2
    wanted = set(words(goal.product_type))
    title_score = len(wanted & set(words(product.title))) / len(wanted) if wanted else 0.2
    reward = 1.0 if query_match or category_match or title_score > 0.2 else 0.5
    if title_score < 0.1:
        reward = 0.1
    if title_score == 0.0:
        reward = 0.0
    return reward


def attribute_matches(product: Product, goal: Goal) -> int:
    text = " | ".join([product.title, *product.features, product.description]).lower()
    return sum(
        any(token_set_ratio(have, wanted) > FUZZY_MATCH for have in product.attributes) or wanted in text
        for wanted in goal.attributes
    )


def option_matches(chosen: Iterable[str], goal: Goal) -> int:
    values = list(chosen)
    return sum(
        any(token_set_ratio(have, wanted) > FUZZY_MATCH for have in values) for _, wanted in goal.options
    )


def purchase_score(product: Product, goal: Goal, chosen: Mapping[str, str]) -> PurchaseScore:
    """The reward of buying ``product`` with the option values ``chosen`` (name -> value) for ``goal``."""
    r_type = type_reward(product, goal)
    attributes = attribute_matches(product, goal)
    options = option_matches(chosen.values(), goal)
    price_ok = product.price <= goal.price_upper
    total = (attributes + options + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return PurchaseScore(round(total * r_type, 6), r_type, attributes, options, price_ok)
