"""The shopping expert: reads only the instruction, the page text and the page's actions.

It searches with the instruction's keywords (fillers, option labels and the price clause
dropped); on a results page it opens the first product not tried yet whose title holds every
descriptive word of the instruction and whose price is under the bound, turning up to five
pages; on a product page it goes back if a wanted option value is not offered (at most three
times), else clicks each wanted value and ``Buy Now``. It never reads the goal's hidden target,
so a policy imitating it can learn it from what it sees. Works on WebShop's own pages too
(case-insensitive buttons). Pure module.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.envs.webshop import pages
from services.envs.webshop.scoring import words
from services.envs.webshop.shop import parse_action, same_button

MAX_RESULT_PAGES = 5
MAX_GIVE_UPS = 3
_FILLER = frozenset(
    [
        "i",
        "am",
        "looking",
        "for",
        "a",
        "an",
        "some",
        "need",
        "find",
        "me",
        "want",
        "to",
        "buy",
        "that",
        "is",
        "are",
        "and",
        "with",
        "the",
        "of",
    ]
)
_PRICE_BOUND = re.compile(r",?\s*(?:and\s+)?price lower than ([0-9]+(?:\.[0-9]+)?) dollars")
_OPTION = re.compile(r"([a-z][a-z ]*?):\s*([^,]+)")
_PAGE = re.compile(r"Page (\d+) \(Total results: \d+\)")
_ASIN = re.compile(r"^b0[0-9a-z]{8}$", re.IGNORECASE)
_PRICE = re.compile(r"\$\s*([0-9]+(?:\.[0-9]+)?)")
_CLICK = re.compile(r"^click\[(.*)\]$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class GoalReading:
    """What the instruction asks for, as far as its words tell."""

    keywords: str
    title_words: frozenset[str]
    option_values: tuple[str, ...]
    price_upper: float | None


def read_instruction(instruction: str) -> GoalReading:
    text = " ".join(instruction.lower().split()).removeprefix("instruction:").strip()
    bound = _PRICE_BOUND.search(text)
    if bound is not None:
        text = text[: bound.start()]
    head, _, tail = text.partition(" with ")
    values = tuple(v.strip() for _, v in _OPTION.findall(tail)) if tail else ()
    described = [w for w in words(head) if w not in _FILLER]
    keywords = list(dict.fromkeys([*described, *(w for v in values for w in words(v))]))
    return GoalReading(
        keywords=" ".join(keywords),
        title_words=frozenset(described),
        option_values=values,
        price_upper=float(bound.group(1)) if bound is not None else None,
    )


@dataclass(frozen=True)
class Listing:
    asin: str
    title: str
    price: float | None


def clicks(admissible: Sequence[str]) -> list[str]:
    """The button names of ``click[...]`` actions."""
    return [m.group(1) for a in admissible if (m := _CLICK.match(a.strip()))]


def parse_results(observation: str, buttons: Sequence[str]) -> list[Listing]:
    """The products of a results page (id, title, lowest price), in page order."""
    parts = [p.strip() for p in observation.split(pages.SEP.strip())]
    ids = {b.lower() for b in buttons if _ASIN.match(b)}
    listings = []
    for i, part in enumerate(parts[:-1]):
        if part.lower() in ids:
            price = _PRICE.search(parts[i + 2]) if i + 2 < len(parts) else None
            listings.append(Listing(part, parts[i + 1], float(price.group(1)) if price else None))
    return listings


@dataclass
class ShopExpert:
    instruction: str
    reading: GoalReading = field(init=False)
    tried: set[str] = field(default_factory=set)
    chosen: set[str] = field(default_factory=set)
    give_ups: int = 0
    _page: str = "search"

    def __post_init__(self) -> None:
        self.reading = read_instruction(self.instruction)

    def record(self, action: str) -> None:
        """Remember an action played on the page last shown to ``next_action``."""
        parsed = parse_action(action)
        if parsed is None:
            return
        verb, argument = parsed
        if verb == "search" or same_button(argument, pages.BACK_TO_SEARCH):
            self.chosen = set()
        elif self._page == "results" and _ASIN.match(argument):
            self.tried.add(argument.lower())
            self.chosen = set()
        elif self._page == "item" and same_button(argument, pages.PREV_PAGE):
            self.give_ups += 1
        elif self._page == "item":
            self.chosen.add(argument.lower())

    def next_action(self, observation: str, admissible: Sequence[str]) -> str | None:
        """The expert's action on this page (one of ``admissible``), or None when nothing is left."""
        buttons = clicks(admissible)
        self._page = _page_kind(observation, admissible, buttons)
        match self._page:
            case "search":
                return f"search[{self.reading.keywords}]"
            case "results":
                return _click(buttons, self._pick(observation, buttons))
            case "item":
                return _click(buttons, self._on_item(buttons))
            case "detail":
                return _click(buttons, pages.PREV_PAGE)
            case _:
                return None

    def _fits(self, listing: Listing) -> tuple[bool, float]:
        wanted = self.reading.title_words
        coverage = len(wanted & set(words(listing.title))) / len(wanted) if wanted else 1.0
        bound = self.reading.price_upper
        return (listing.price is None or bound is None or listing.price <= bound), coverage

    def _pick(self, observation: str, buttons: list[str]) -> str:
        listings = parse_results(observation, buttons)
        fresh = [x for x in listings if x.asin.lower() not in self.tried]
        good = [x for x in fresh if self._fits(x) == (True, 1.0)]
        if good:
            return good[0].asin
        page = _PAGE.search(observation)
        if _has(buttons, pages.NEXT_PAGE) and (int(page.group(1)) if page else 1) < MAX_RESULT_PAGES:
            return pages.NEXT_PAGE
        if fresh:
            return max(fresh, key=self._fits).asin
        return listings[0].asin if listings else pages.BACK_TO_SEARCH

    def _on_item(self, buttons: list[str]) -> str:
        fixed = {b.lower() for b in pages.FIXED_BUTTONS}
        offered = [b for b in buttons if b.lower() not in fixed]
        wanted = list(self.reading.option_values) or _named_in(self.instruction, offered)
        missing = [w for w in wanted if not _has(offered, w)]
        if missing and self.give_ups < MAX_GIVE_UPS:
            return pages.PREV_PAGE
        for value in wanted:
            if value.lower() not in self.chosen and _has(offered, value):
                return value
        return pages.BUY_NOW


def _page_kind(observation: str, admissible: Sequence[str], buttons: list[str]) -> str:
    if any(a.strip().lower().startswith("search[") for a in admissible):
        return "search"
    if _has(buttons, pages.BUY_NOW):
        return "item"
    if any(_ASIN.match(b) for b in buttons) or _PAGE.search(observation):
        return "results"
    if _has(buttons, pages.PREV_PAGE):
        return "detail"
    return "none"


def _has(buttons: Sequence[str], name: str) -> bool:
    return any(same_button(b, name) for b in buttons)


def _click(buttons: Sequence[str], name: str) -> str | None:
    """The admissible spelling of a click on ``name``."""
    button = next((b for b in buttons if same_button(b, name)), None)
    return None if button is None else f"click[{button}]"


def _named_in(instruction: str, offered: Sequence[str]) -> list[str]:
    """Offered option values the instruction names (the longest of overlapping ones)."""
    text = f" {' '.join(words(instruction))} "
    named = [v for v in offered if f" {' '.join(words(v))} " in text]
    return [v for v in named if not any(v != o and v.lower() in o.lower() for o in named)]
