"""The local shop: catalogue + search engine + goals, and one shopper's session as a page machine.

search page --search[kw]--> results (page 1 of the top ``max_results``) --click[<id>]--> product
page (options, Description, Features) --click[Buy Now]--> done, scored by ``purchase_score``.
``Back to Search`` returns to the search page from anywhere; ``< Prev`` goes one page back.
An action that is not possible on the current page changes nothing (``valid`` is False), as in
WebShop. Pure module.
"""

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from services.envs.webshop import pages
from services.envs.webshop.catalogue import Catalogue, Product
from services.envs.webshop.goals import Goal, GoalBook
from services.envs.webshop.scoring import PurchaseScore, purchase_score
from services.envs.webshop.search_engine import SearchEngine, product_document

_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)

PageKind = Literal["search", "results", "item", "description", "features", "done"]


def parse_action(action: str) -> tuple[str, str] | None:
    """('search' | 'click', argument with spaces collapsed), or None when it is neither form."""
    match = _ACTION.match(action)
    if match is None:
        return None
    argument = " ".join(match.group(2).split())
    return (match.group(1).lower(), argument) if argument else None


def same_button(a: str, b: str) -> bool:
    """Buttons are named case- and spacing-insensitively ('buy now' is 'Buy Now')."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


class Shop:
    """Everything shoppers share: products, the search index and the goals."""

    def __init__(
        self, catalogue: Catalogue, goals: GoalBook, results_per_page: int, max_results: int
    ) -> None:
        self.catalogue = catalogue
        self.goals = goals
        self.results_per_page = results_per_page
        self.max_results = max_results

    @cached_property
    def engine(self) -> SearchEngine:
        return SearchEngine([product_document(p) for p in self.catalogue.products])

    def build_index(self) -> None:
        """Index the catalogue now (otherwise the first search does)."""
        _ = self.engine

    def search(self, keywords: str) -> list[Product]:
        return [self.catalogue.products[i] for i in self.engine.search(keywords, self.max_results)]

    def session(self, goal_id: int) -> "ShopSession":
        return ShopSession(self, self.goals.goal(goal_id))


@dataclass(frozen=True)
class ShopStep:
    valid: bool
    reward: float
    done: bool
    score: PurchaseScore | None = None


@dataclass
class _View:
    kind: PageKind = "search"
    keywords: str = ""
    results: list[Product] = field(default_factory=list)
    page: int = 1
    product: Product | None = None
    chosen: dict[str, str] = field(default_factory=dict)


class ShopSession:
    def __init__(self, shop: Shop, goal: Goal) -> None:
        self.shop = shop
        self.goal = goal
        self._view = _View()
        self.score: PurchaseScore | None = None

    @property
    def instruction(self) -> str:
        return self.goal.instruction

    @property
    def page_kind(self) -> PageKind:
        return self._view.kind

    @property
    def done(self) -> bool:
        return self._view.kind == "done"

    @property
    def has_search_bar(self) -> bool:
        return self._view.kind == "search"

    def _pages(self) -> int:
        per = self.shop.results_per_page
        return max(1, -(-len(self._view.results) // per))

    def _shown(self) -> list[Product]:
        per, page = self.shop.results_per_page, self._view.page
        return self._view.results[(page - 1) * per : page * per]

    def _product(self) -> Product:
        if self._view.product is None:
            raise RuntimeError(f"no product on a {self._view.kind} page")
        return self._view.product

    def clickables(self) -> list[str]:
        """The buttons on the current page, in page order."""
        match self._view.kind:
            case "search" | "done":
                return []
            case "results":
                return pages.results_buttons(self._view.page, self._pages(), self._shown())
            case "item":
                return pages.item_buttons(self._product())
            case "description" | "features":
                return [pages.BACK_TO_SEARCH, pages.PREV_PAGE]
            case _:
                raise RuntimeError(f"unknown page {self._view.kind!r}")

    def admissible_actions(self) -> list[str]:
        return pages.admissible_actions(self.has_search_bar, self.clickables())

    def observation(self) -> str:
        view, text = self._view, self.instruction
        match view.kind:
            case "search":
                return pages.search_page(text)
            case "results":
                return pages.results_page(text, view.page, self._pages(), len(view.results), self._shown())
            case "item":
                return pages.item_page(text, self._product())
            case "description":
                return pages.detail_page(text, [self._product().description])
            case "features":
                return pages.detail_page(text, list(self._product().features))
            case "done":
                reward = self.score.reward if self.score is not None else 0.0
                return pages.done_page(self._product(), view.chosen, reward)
            case _:
                raise RuntimeError(f"unknown page {view.kind!r}")

    def step(self, action: str) -> ShopStep:
        """Play one action; an impossible one changes nothing and reports ``valid=False``."""
        parsed = parse_action(action)
        if parsed is None or self.done:
            return ShopStep(False, 0.0, self.done)
        verb, argument = parsed
        if verb == "search":
            if not self.has_search_bar:
                return ShopStep(False, 0.0, False)
            self._view = _View("results", argument, self.shop.search(argument))
            return ShopStep(True, 0.0, False)
        button = next((c for c in self.clickables() if same_button(c, argument)), None)
        if button is None:
            return ShopStep(False, 0.0, False)
        return self._click(button)

    def _click(self, button: str) -> ShopStep:
        view = self._view
        if button == pages.BACK_TO_SEARCH:
            self._view = _View()
        elif button == pages.NEXT_PAGE:
            view.page += 1
        elif button == pages.PREV_PAGE:
            view.kind, view.page = self._back(view)
        elif view.kind == "results":
            view.kind, view.product, view.chosen = "item", self.shop.catalogue.by_asin[button], {}
        elif button == pages.DESCRIPTION:
            view.kind = "description"
        elif button == pages.FEATURES:
            view.kind = "features"
        elif button == pages.BUY_NOW:
            self.score = purchase_score(self._product(), self.goal, view.chosen)
            view.kind = "done"
            return ShopStep(True, self.score.reward, True, self.score)
        else:
            product = self._product()
            name = next(n for n, values in product.options if button in values)
            view.chosen[name] = button
        return ShopStep(True, 0.0, False)

    @staticmethod
    def _back(view: _View) -> tuple[PageKind, int]:
        match view.kind:
            case "results":
                return "results", view.page - 1
            case "item":
                return "results", view.page
            case _:
                return "item", view.page
