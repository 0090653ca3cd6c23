"""The shop's pages as text, in WebShop's simple text mode: visible strings joined by ``[SEP]``,
the instruction on top of every page; and the actions a page admits.

An action is ``search[<keywords>]`` while the search bar is shown (the search page) or
``click[<button>]`` for a button on the page: navigation, a product id on a results page, an
option value, ``Description``, ``Features`` and ``Buy Now`` on a product page. The final page
carries the machine-readable ``[WEBSHOP_FINAL_SCORE=...]`` marker (paper, Appendix "WebShop").
Pure module.
"""

from collections.abc import Mapping, Sequence

from services.envs.webshop.catalogue import Product

SEP = " [SEP] "
BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
DESCRIPTION = "Description"
FEATURES = "Features"
FIXED_BUTTONS = (
    BACK_TO_SEARCH,
    NEXT_PAGE,
    PREV_PAGE,
    BUY_NOW,
    DESCRIPTION,
    FEATURES,
    "Reviews",
    "Attributes",
)
SEARCH_TEMPLATE = "search[<your keywords>]"
SCORE_MARKER = "WEBSHOP_FINAL_SCORE"


def search_page(instruction: str) -> str:
    return SEP.join(["WebShop", "Instruction:", instruction, "Search"])


def _header(instruction: str) -> list[str]:
    return ["Instruction:", instruction, BACK_TO_SEARCH]


def results_buttons(page: int, pages: int, products: Sequence[Product]) -> list[str]:
    return [
        BACK_TO_SEARCH,
        *([PREV_PAGE] if page > 1 else []),
        *([NEXT_PAGE] if page < pages else []),
        *(p.asin for p in products),
    ]


def results_page(instruction: str, page: int, pages: int, total: int, products: Sequence[Product]) -> str:
    parts = [*_header(instruction), f"Page {page} (Total results: {total})"]
    parts += [PREV_PAGE] if page > 1 else []
    parts += [NEXT_PAGE] if page < pages else []
    for product in products:
        parts += [product.asin, product.title, f"${product.price:.2f}"]
    return SEP.join(parts)


def item_buttons(product: Product) -> list[str]:
    values = [v for _, vs in product.options for v in vs]
    return [BACK_TO_SEARCH, PREV_PAGE, *values, DESCRIPTION, FEATURES, BUY_NOW]


def item_page(instruction: str, product: Product) -> str:
    parts = [*_header(instruction), PREV_PAGE]
    for name, values in product.options:
        parts += [name, *values]
    parts += [product.title, f"Price: ${product.price:.2f}", "Rating: N.A.", DESCRIPTION, FEATURES, BUY_NOW]
    return SEP.join(parts)


def detail_page(instruction: str, lines: Sequence[str]) -> str:
    """The Description or Features page of a product."""
    return SEP.join([*_header(instruction), PREV_PAGE, *lines])


def done_page(product: Product, chosen: Mapping[str, str], reward: float) -> str:
    options = ", ".join(f"{name}: {value}" for name, value in chosen.items()) or "none"
    parts = ["Thank you for shopping with us!", "Purchased", product.asin, product.title, "Options", options]
    return SEP.join([*parts, "Your score (min 0.0, max 1.0)", f"{reward:.4f}"])


def final_observation(page: str, reward: float) -> str:
    """The last observation of an episode: the page, then the score marker for the reward path."""
    return f"{page.strip()}\nEpisode finished with score={reward:.3f}. [{SCORE_MARKER}={reward:.6f}]"


def admissible_actions(has_search_bar: bool, clickables: Sequence[str]) -> list[str]:
    """The page's actions in page order; WebShop's own 'search' button is the search action."""
    clicks = [f"click[{c}]" for c in clickables if c.strip().lower() != "search"]
    return [SEARCH_TEMPLATE, *clicks] if has_search_bar else clicks
