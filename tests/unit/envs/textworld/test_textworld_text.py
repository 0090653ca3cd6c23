"""TextWorld's interpreter decorations are removed from observations."""

from services.envs.textworld.backend import (
    challenge_settings,
    clean_text,
    game_seed,
    strip_banner,
)
from services.envs.textworld.settings import TextWorldGenSettings

BANNER = "\n".join(
    [
        "                    ________  ________  __    __  ________",
        "                   |        \\|        \\|  \\  |  \\|        \\",
        "                    \\$$$$$$$$| $$$$$$$$| $$  | $$ \\$$$$$$$$",
        "",
        "Get the key.",
        "",
        "-= Kitchen =-",
        "You are in a kitchen.",
        "",
        "",
        "",
        ">                                   -= Kitchen =-0/1",
    ]
)


def test_banner_prompt_and_blank_runs_are_removed():
    assert strip_banner(BANNER) == "Get the key.\n\n-= Kitchen =-\nYou are in a kitchen."
    assert clean_text("You win.\n\n\n\n>   -= Hall =-3/3") == "You win."


def test_held_out_split_uses_textworld_held_out_variants_and_other_seeds():
    tw = TextWorldGenSettings()
    assert challenge_settings("tw-simple", "valid_unseen", 0, tw)["test"] is True
    assert challenge_settings("tw-cooking", "train", 0, tw)["split"] == "train"
    assert challenge_settings("tw-cooking", "valid_unseen", 0, tw)["split"] == "valid"
    assert {game_seed("train", i) for i in range(100)}.isdisjoint(
        {game_seed("valid_unseen", i) for i in range(100)}
    )
