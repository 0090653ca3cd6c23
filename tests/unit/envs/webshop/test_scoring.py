"""WebShop's purchase reward: type, attribute, option and price terms, and the fuzzy matcher."""

from dataclasses import replace

import pytest

from services.envs.webshop.catalogue import Catalogue, Product
from services.envs.webshop.goals import Goal
from services.envs.webshop.scoring import purchase_score, token_set_ratio, type_reward

TEE = Product(
    asin="B0TEST0001",
    product_type="t-shirt",
    category="fashion",
    path=("Clothing, Shoes & Jewelry", "Clothing", "T-Shirts"),
    brand="Norvik",
    title="Norvik T-Shirt - Machine Wash, Slim Fit, Crew Neck",
    attributes=("machine wash", "slim fit", "crew neck"),
    options=(("color", ("black", "navy blue")), ("size", ("medium", "large"))),
    price=19.99,
    description="The Norvik t-shirt: machine wash, slim fit, crew neck.",
    features=("Machine wash", "Slim fit", "Crew neck", "Sold by the Norvik store"),
)
GOAL = Goal(
    goal_id=0,
    asin=TEE.asin,
    category="fashion",
    product_type="t-shirt",
    path=TEE.path,
    attributes=("machine wash", "slim fit"),
    options=(("color", "navy blue"), ("size", "large")),
    price_upper=30.0,
    instruction="i need a machine wash and slim fit t-shirt with color: navy blue, and size: large",
)


def test_the_goals_own_product_with_its_options_scores_one():
    score = purchase_score(TEE, GOAL, {"color": "navy blue", "size": "large"})
    assert score.reward == 1.0 and score.success and score.r_type == 1.0


@pytest.mark.parametrize(
    ("chosen", "price", "expected"),
    [
        ({"color": "black", "size": "large"}, 19.99, 4 / 5),  # one option wrong
        ({}, 19.99, 3 / 5),  # no option chosen
        ({"color": "navy blue", "size": "large"}, 35.99, 4 / 5),  # over the price bound
        ({"size": "medium"}, 99.99, 2 / 5),
    ],
)
def test_each_missed_term_costs_its_share(chosen, price, expected):
    score = purchase_score(replace(TEE, price=price), GOAL, chosen)
    assert score.reward == pytest.approx(expected) and not score.success


def test_attributes_match_fuzzily_or_in_the_text():
    other = replace(TEE, attributes=("crew neck",), title="Norvik T-Shirt - Slim Fit", features=())
    # 'slim fit' is in the title, 'machine wash' only in the description.
    assert purchase_score(other, GOAL, {"color": "navy blue", "size": "large"}).attribute_matches == 2
    bare = replace(other, description="", title="Norvik T-Shirt")
    assert purchase_score(bare, GOAL, {"color": "navy blue", "size": "large"}).reward == pytest.approx(3 / 5)


def test_a_product_of_another_type_scores_zero_or_is_discounted():
    hoodie = replace(TEE, product_type="hoodie", title="Norvik Hoodie - Machine Wash, Slim Fit")
    assert type_reward(hoodie, GOAL) == 0.0  # no type word in the title, whatever else matches
    assert purchase_score(hoodie, GOAL, {"color": "navy blue", "size": "large"}).reward == 0.0
    shirt = replace(TEE, product_type="dress shirt", path=("Clothing", "Shirts", "Dress"), title="Shirt")
    assert type_reward(shirt, GOAL) == 1.0  # half of the type words: more than 20%
    stranger = replace(shirt, path=("Home", "Decor", "Posters"), title="T Poster")
    assert type_reward(stranger, GOAL) == 1.0  # 't' is a type word too
    tool = replace(stranger, title="Shirt Stretcher Tool", product_type="tool")
    assert type_reward(tool, replace(GOAL, product_type="shirt rack stand")) == 1.0  # 1/3 of the words
    assert type_reward(tool, replace(GOAL, product_type="shirt rack with five long arms")) == 0.5  # 1/6
    long_name = "shirt drying rack with ten long arms and two big hooks"  # 1 word of 11 in the title
    assert type_reward(tool, replace(GOAL, product_type=long_name)) == 0.1


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("slim fit", "fit slim", 100),
        ("large", "x-large", 100),  # one word set inside the other
        ("1 pound", "2 pound", 86),  # WebShop's matcher credits this too
        ("us 7", "us 12", 67),
        ("navy blue", "black", 43),
        ("", "black", 0),
    ],
)
def test_token_set_ratio(a, b, expected):
    assert token_set_ratio(a, b) == expected


def test_every_goal_of_the_catalogue_is_won_by_its_own_product(shop):
    catalogue: Catalogue = shop.catalogue
    for goal_id in range(0, 3200, 97):
        goal = shop.goals.goal(goal_id)
        assert purchase_score(catalogue.by_asin[goal.asin], goal, dict(goal.options)).reward == 1.0
