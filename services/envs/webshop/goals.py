"""Shopping goals generated from the catalogue, and the paper's goal-id partition.

Goal ``g`` is drawn from its own seeded RNG: a target product, some of its attributes, one value
of each of its options, and a price bound above its price (WebShop's synthetic goals: two of the
four $10 tiers above the price, the higher one). The instruction names the product type, those
attributes, the options and the bound. Evaluation takes goal ids ``[0, N_eval)``, training
``[N_eval, N_eval + N_train)`` (paper, Appendix "OPD Data Scale And Train/Test Construction").
Pure module: standard library only.
"""

import random
from dataclasses import dataclass

from services.envs.webshop.catalogue import Catalogue, Product
from services.errors import InputError

PRICE_TIERS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
NO_PRICE_BOUND = 1_000_000.0
EVAL_SPLIT = "valid_unseen"
TRAIN_SPLIT = "train"

# Types read as plural or mass nouns ("some coffee beans", not "a coffee beans").
_MASS_TYPES = frozenset(
    {
        "jeans",
        "running shoes",
        "dark chocolate",
        "green tea",
        "coffee beans",
        "protein bars",
        "trail mix",
        "olive oil",
    }
)
_OPENINGS = ("i am looking for", "i need", "find me", "i want to buy")


@dataclass(frozen=True)
class Goal:
    goal_id: int
    asin: str
    category: str
    product_type: str
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price_upper: float
    instruction: str


def make_goal(catalogue: Catalogue, goal_id: int) -> Goal:
    """The goal with this id; the same catalogue and id always give the same goal."""
    if goal_id < 0:
        raise InputError(f"goal ids are >= 0, got {goal_id}")
    rng = random.Random(f"webshop-goal:{catalogue.seed}:{goal_id}")
    product = catalogue.products[rng.randrange(len(catalogue))]
    count = min(len(product.attributes), rng.choice((1, 2, 2, 3)))
    attributes = tuple(rng.sample(product.attributes, count))
    options = tuple((name, rng.choice(values)) for name, values in product.options)
    above = [p for p in PRICE_TIERS if p > product.price][:4]
    price_upper = sorted(rng.sample(above, 2))[1] if len(above) >= 2 else NO_PRICE_BOUND
    return Goal(
        goal_id=goal_id,
        asin=product.asin,
        category=product.category,
        product_type=product.product_type,
        path=product.path,
        attributes=attributes,
        options=options,
        price_upper=price_upper,
        instruction=instruction_text(rng, product, attributes, options, price_upper),
    )


def instruction_text(
    rng: random.Random,
    product: Product,
    attributes: tuple[str, ...],
    options: tuple[tuple[str, str], ...],
    price_upper: float,
) -> str:
    """WebShop's synthetic wording: '<request> with <option>: <value>, and price lower than X dollars'."""
    listed = attributes[0] if len(attributes) == 1 else f"{', '.join(attributes[:-1])} and {attributes[-1]}"
    kind = product.product_type
    described = f"{listed} {kind}" if rng.random() < 0.6 else f"{kind} that is {listed}"
    article = "some" if kind in _MASS_TYPES else "an" if described[0] in "aeiou" else "a"
    text = f"{rng.choice(_OPENINGS)} {article} {described}"
    if options:
        text += " with " + ", and ".join(f"{name}: {value}" for name, value in options)
    if price_upper < NO_PRICE_BOUND:
        text += f", and price lower than {price_upper:.2f} dollars"
    return text


@dataclass(frozen=True)
class GoalSplits:
    """Disjoint goal-id ranges: evaluation ``[0, eval_goals)``, training right after it."""

    eval_goals: int
    train_goals: int

    @property
    def total(self) -> int:
        return self.eval_goals + self.train_goals

    def ids(self, split: str) -> range:
        match split:
            case "valid_unseen":
                return range(0, self.eval_goals)
            case "train":
                return range(self.eval_goals, self.total)
            case _:
                raise InputError(f"unknown split {split!r}; webshop has 'train' and 'valid_unseen'")

    def goal_id(self, split: str, index: int) -> int:
        """The ``index``-th goal id of a split (indices wrap around the split's size)."""
        ids = self.ids(split)
        return ids[index % len(ids)]


class GoalBook:
    """The goals of a catalogue, generated on demand, and their grouping by category."""

    def __init__(self, catalogue: Catalogue, splits: GoalSplits) -> None:
        self.catalogue = catalogue
        self.splits = splits
        self._goals: dict[int, Goal] = {}
        self._by_category: dict[tuple[str, str], list[int]] = {}
        self._grouped: set[str] = set()

    def goal(self, goal_id: int) -> Goal:
        if not 0 <= goal_id < self.splits.total:
            raise InputError(f"goal id {goal_id} is outside the shop's goals [0, {self.splits.total})")
        if goal_id not in self._goals:
            self._goals[goal_id] = make_goal(self.catalogue, goal_id)
        return self._goals[goal_id]

    def category_ids(self, split: str, category: str) -> list[int]:
        """The goal ids of one category in a split, ascending."""
        if split not in self._grouped:
            for g in self.splits.ids(split):
                self._by_category.setdefault((split, self.goal(g).category), []).append(g)
            self._grouped.add(split)
        return self._by_category.get((split, category), [])
