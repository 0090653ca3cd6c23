"""The shopping expert: reads the instruction and pages only, always admissible, wins its goals."""

import pytest

from services.envs.webshop.expert import ShopExpert, parse_results, read_instruction
from services.envs.webshop.shop import Shop


def play(shop: Shop, goal_id: int, max_turns: int = 30) -> tuple[float, list[str]]:
    """The expert's episode on one goal: (reward, actions); every action must be admissible."""
    session = shop.session(goal_id)
    expert = ShopExpert(session.instruction)
    actions: list[str] = []
    action = expert.next_action(session.observation(), session.admissible_actions())
    while action is not None and len(actions) < max_turns:
        admissible = session.admissible_actions()
        assert action in admissible or (action.startswith("search[") and admissible[0].startswith("search["))
        expert.record(action)
        actions.append(action)
        if session.step(action).done:
            break
        action = expert.next_action(session.observation(), session.admissible_actions())
    return (session.score.reward if session.score else 0.0), actions


def test_reading_an_instruction():
    reading = read_instruction(
        "Instruction: i am looking for a machine wash and slim fit t-shirt with color: navy blue, "
        "and size: x-large, and price lower than 30.00 dollars"
    )
    assert reading.keywords == "machine wash slim fit t shirt navy blue x large"
    assert reading.title_words == {"machine", "wash", "slim", "fit", "t", "shirt"}
    assert reading.option_values == ("navy blue", "x-large") and reading.price_upper == 30.0
    plain = read_instruction("i need a long lasting 6.76 fl oz bottle of eau de toilette")
    assert plain.option_values == () and plain.price_upper is None
    assert plain.keywords == "long lasting 6 76 fl oz bottle eau de toilette"


def test_parse_results_reads_ids_titles_and_prices_in_webshops_lower_case_too():
    page = (
        "Instruction: [SEP] find me a hat [SEP] back to search [SEP] Page 1 (Total results: 2) [SEP] "
        "B0AAAAAAA1 [SEP] Red Hat [SEP] $12.99 [SEP] B0AAAAAAA2 [SEP] Blue Hat [SEP] $10.00 to $14.00"
    )
    listings = parse_results(page, ["back to search", "b0aaaaaaa1", "b0aaaaaaa2"])
    assert [(x.asin, x.title, x.price) for x in listings] == [
        ("B0AAAAAAA1", "Red Hat", 12.99),
        ("B0AAAAAAA2", "Blue Hat", 10.0),
    ]


def test_expert_wins_a_goal_in_four_to_five_steps(shop):
    reward, actions = play(shop, 0)
    goal = shop.goals.goal(0)
    assert reward == 1.0
    assert actions == [
        f"search[{read_instruction(goal.instruction).keywords}]",
        f"click[{goal.asin}]",
        *(f"click[{value}]" for _, value in goal.options),
        "click[Buy Now]",
    ]


@pytest.mark.parametrize("split_start", [0, 200])
def test_expert_wins_nearly_every_goal_of_both_splits(shop, split_start):
    runs = [play(shop, g) for g in range(split_start, split_start + 150)]
    rewards = [r for r, _ in runs]
    assert sum(rewards) / len(rewards) >= 0.98 and sum(r == 1.0 for r in rewards) >= 145
    assert max(len(a) for _, a in runs) <= 15


def test_expert_goes_back_when_a_wanted_option_is_not_offered(shop):
    session = shop.session(0)
    expert = ShopExpert(session.instruction)
    session.step(f"search[{expert.reading.keywords}]")
    expert.record(f"search[{expert.reading.keywords}]")
    wrong = next(
        b
        for b in session.clickables()[2:]
        if session.goal.options[0][1]
        not in shop.catalogue.by_asin[b].option_values(session.goal.options[0][0])
    )
    expert.next_action(session.observation(), session.admissible_actions())  # on the results page
    expert.record(f"click[{wrong}]")
    session.step(f"click[{wrong}]")
    assert expert.next_action(session.observation(), session.admissible_actions()) == "click[< Prev]"
    expert.record("click[< Prev]")
    session.step("click[< Prev]")
    retry = expert.next_action(session.observation(), session.admissible_actions())
    assert retry is not None and retry != f"click[{wrong}]" and expert.give_ups == 1


def test_expert_leaves_detail_pages_and_has_nothing_to_do_when_done(shop):
    session = shop.session(3)
    session.step("search[floor lamp]")
    session.step(f"click[{session.clickables()[2]}]")
    session.step("click[Description]")
    expert = ShopExpert(session.instruction)
    assert expert.next_action(session.observation(), session.admissible_actions()) == "click[< Prev]"
    assert expert.next_action("Thank you for shopping with us!", []) is None
    session.step("click[Back to Search]")
    session.step("search[zzz qqq]")
    nothing_found = expert.next_action(session.observation(), session.admissible_actions())
    assert session.clickables() == ["Back to Search"] and nothing_found == "click[Back to Search]"
