"""Exact match after the standard QA normalisation."""

import pytest

from services.envs.search.answers import exact_match, normalize_answer


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The  Kessrow Press.", "kessrow press"),
        ("  an Apple, a pear!  ", "apple pear"),
        ("Theodor Anvil", "theodor anvil"),  # 'the' only as a whole word
        ("1954", "1954"),
        ("", ""),
    ],
)
def test_normalize_answer(text: str, normalised: str):
    assert normalize_answer(text) == normalised


def test_exact_match_against_any_gold_answer():
    assert exact_match("the kessrow", ["Kessrow"])
    assert exact_match("Vorn Press", ["Kessrow", "vorn press."])
    assert not exact_match("Kessrow city", ["Kessrow"])
    assert not exact_match("Kessrow", [])
