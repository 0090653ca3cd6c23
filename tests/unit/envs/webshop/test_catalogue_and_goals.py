"""The generated catalogue and its goals: deterministic from the seed, well-formed, split by goal id."""

import random

import pytest

from services.envs.webshop.catalogue import Catalogue, generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits, instruction_text, make_goal
from services.envs.webshop.vocabulary import CATEGORIES, PRODUCT_TYPES
from services.errors import ConfigError, InputError


def test_the_same_seed_gives_the_same_catalogue_and_another_seed_another(catalogue):
    assert generate_catalogue(0, 3000).to_json() == catalogue.to_json()
    other = generate_catalogue(1, 3000)
    assert [p.asin for p in other.products] != [p.asin for p in catalogue.products]
    assert [p.product_type for p in other.products] == [p.product_type for p in catalogue.products]


def test_catalogue_survives_its_json_file(catalogue):
    again = Catalogue.from_json(catalogue.to_json())
    assert again.seed == 0 and again.products == catalogue.products


def test_products_are_well_formed(catalogue):
    assert len(catalogue) == 3000 and len(catalogue.by_asin) == 3000
    assert {p.product_type for p in catalogue.products} == {t.name for t in PRODUCT_TYPES}
    assert {p.category for p in catalogue.products} == set(CATEGORIES)
    for product in catalogue.products:
        assert product.asin.startswith("B0") and len(product.asin) == 10
        assert 2 <= len(product.attributes) <= 4
        assert all(a.title() in product.title for a in product.attributes)
        values = [v for _, vs in product.options for v in vs]
        assert len(values) == len(set(values)) and all(2 <= len(vs) <= 5 for _, vs in product.options)
        assert product.price > 0 and f"{product.price:.2f}".endswith(".99")


def test_too_small_a_catalogue_is_a_config_error():
    with pytest.raises(ConfigError, match="at least 30 products"):
        generate_catalogue(0, 10)


def test_goals_are_deterministic_and_made_from_a_real_product(catalogue):
    goal = make_goal(catalogue, 17)
    assert make_goal(catalogue, 17) == goal and make_goal(catalogue, 18) != goal
    target = catalogue.by_asin[goal.asin]
    assert set(goal.attributes) <= set(target.attributes) and 1 <= len(goal.attributes) <= 3
    assert [name for name, _ in goal.options] == list(target.option_names)
    assert all(value in target.option_values(name) for name, value in goal.options)
    assert target.price < goal.price_upper and goal.price_upper % 10 == 0
    assert goal.product_type in goal.instruction and f"{goal.price_upper:.2f} dollars" in goal.instruction
    assert all(f"{name}: {value}" in goal.instruction for name, value in goal.options)
    assert all(attribute in goal.instruction for attribute in goal.attributes)


def test_instruction_wording_follows_webshop():
    product = generate_catalogue(3, 30).products[0]
    options = ((product.options[0][0], product.options[0][1][0]),)
    text = instruction_text(random.Random(0), product, product.attributes[:2], options, 40.0)
    name, value = options[0]
    assert text.endswith(f" with {name}: {value}, and price lower than 40.00 dollars")
    assert text.split()[0] in ("i", "find")


def test_eval_and_train_take_disjoint_goal_id_ranges():
    splits = GoalSplits(eval_goals=200, train_goals=3000)
    assert splits.ids("valid_unseen") == range(0, 200) and splits.ids("train") == range(200, 3200)
    assert splits.goal_id("valid_unseen", 5) == 5 and splits.goal_id("train", 5) == 205
    assert splits.goal_id("train", 3000) == 200  # indices wrap inside the split
    with pytest.raises(InputError, match="unknown split"):
        splits.ids("test")


def test_goal_book_groups_a_split_by_category_and_refuses_foreign_ids(catalogue):
    book = GoalBook(catalogue, GoalSplits(200, 3000))
    groups = {c: book.category_ids("valid_unseen", c) for c in CATEGORIES}
    assert sorted(g for ids in groups.values() for g in ids) == list(range(200))
    assert all(len(ids) >= 20 and all(book.goal(g).category == c for g in ids) for c, ids in groups.items())
    assert book.category_ids("valid_unseen", "toys") == []
    with pytest.raises(InputError, match="outside the shop's goals"):
        book.goal(3200)
