"""The shop's pages: WebShop's text rendering, the buttons each page admits, and navigation."""

import pytest

from services.envs.webshop.pages import SEARCH_TEMPLATE, admissible_actions, final_observation
from services.envs.webshop.search_engine import SearchEngine
from services.envs.webshop.shop import ShopSession, parse_action


@pytest.fixture
def session(shop) -> ShopSession:
    return shop.session(0)


def test_the_search_page_shows_the_instruction_and_admits_only_a_search(session):
    assert session.observation() == (f"WebShop [SEP] Instruction: [SEP] {session.instruction} [SEP] Search")
    assert session.admissible_actions() == [SEARCH_TEMPLATE] and session.clickables() == []


def test_results_list_ids_titles_and_prices_ten_per_page(session):
    assert session.step("search[lightweight windproof rain jacket]").valid
    page = session.observation()
    assert page.startswith(f"Instruction: [SEP] {session.instruction} [SEP] Back to Search [SEP] ")
    assert "Page 1 (Total results: 50) [SEP] Next > [SEP] B0" in page
    buttons = session.clickables()
    assert buttons[:2] == ["Back to Search", "Next >"] and len(buttons) == 12
    first = session.shop.catalogue.by_asin[buttons[2]]
    assert f"{first.asin} [SEP] {first.title} [SEP] ${first.price:.2f}" in page
    assert "Rain Jacket" in first.title
    assert session.admissible_actions() == [f"click[{b}]" for b in buttons]
    session.step("click[Next >]")
    assert session.clickables()[:3] == ["Back to Search", "< Prev", "Next >"]
    assert "Page 2 (Total results: 50)" in session.observation()
    for _ in range(3):
        session.step("click[next >]")  # buttons are case-insensitive
    assert "Page 5" in session.observation() and "Next >" not in session.clickables()
    session.step("click[< Prev]")
    assert "Page 4" in session.observation()


def test_product_page_offers_options_details_and_buy_now(session):
    session.step("search[rain jacket]")
    asin = session.clickables()[2]
    product = session.shop.catalogue.by_asin[asin]
    session.step(f"click[{asin.lower()}]")
    values = [v for _, vs in product.options for v in vs]
    assert session.clickables() == ["Back to Search", "< Prev", *values, "Description", "Features", "Buy Now"]
    page = session.observation()
    assert f"color [SEP] {product.options[0][1][0]}" in page
    assert page.endswith(
        f"Price: ${product.price:.2f} [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Buy Now"
    )
    session.step("click[Features]")
    assert session.clickables() == ["Back to Search", "< Prev"]
    assert session.observation().endswith(" [SEP] ".join(product.features))
    session.step("click[< Prev]")
    assert session.page_kind == "item"
    session.step("click[< Prev]")
    assert session.page_kind == "results" and "Page 1" in session.observation()


def test_impossible_actions_change_nothing(session):
    before = session.observation()
    for action in ("click[Buy Now]", "search[]", "go to shelf 1", "click[B0NOTTHERE]"):
        step = session.step(action)
        assert not step.valid and step.reward == 0.0 and not step.done
        assert session.observation() == before
    session.step("search[rain jacket]")
    assert not session.step("search[hoodie]").valid  # no search bar on a results page


def test_buying_ends_the_episode_with_the_score(shop):
    session = shop.session(0)
    goal = session.goal
    session.step(f"search[{session.shop.catalogue.by_asin[goal.asin].title}]")  # its exact title
    assert goal.asin in session.clickables()
    session.step(f"click[{goal.asin}]")
    for _, value in goal.options:
        assert session.step(f"click[{value}]").valid
    bought = session.step("click[Buy Now]")
    assert bought.done and bought.reward == 1.0 and session.done
    assert session.observation().endswith("Your score (min 0.0, max 1.0) [SEP] 1.0000")
    assert session.admissible_actions() == [] and not session.step("click[Buy Now]").valid


def test_final_observation_carries_the_score_marker():
    text = final_observation("Thank you for shopping with us!", 0.75)
    assert text.endswith("Episode finished with score=0.750. [WEBSHOP_FINAL_SCORE=0.750000]")


def test_admissible_actions_drop_webshops_own_search_button():
    assert admissible_actions(True, ["search"]) == [SEARCH_TEMPLATE]
    assert admissible_actions(False, ["back to search", "b01"]) == ["click[back to search]", "click[b01]"]


@pytest.mark.parametrize(
    ("action", "parsed"),
    [
        ("search[ red  shoes ]", ("search", "red shoes")),
        ("Click[Buy Now]", ("click", "Buy Now")),
        ("click [< Prev]", ("click", "< Prev")),
        ("click[]", None),
        ("buy now", None),
    ],
)
def test_parse_action(action, parsed):
    assert parse_action(action) == parsed


def test_bm25_ranks_rarer_and_repeated_words_first_and_breaks_ties_by_order():
    engine = SearchEngine(["red shoe", "blue shoe", "red red shoe", "green hat", "blue shoe"])
    assert engine.search("red shoe", 10) == [2, 0, 1, 4]
    assert engine.search("blue", 10) == [1, 4] and engine.search("purple", 10) == []
    assert engine.search("shoe", 2) == [0, 1]
