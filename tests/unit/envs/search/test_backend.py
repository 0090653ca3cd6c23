"""The search backend in-process: the expert's gold chain wins every held-out question, from what
it is shown; answers are scored by exact match; the env ends unanswered episodes at max_turns."""

import re
from pathlib import Path

import pytest

from services.envs.backend import GameChoice
from services.envs.search.actions import ADMISSIBLE, parse_action
from services.envs.search.backend import SearchBackend
from services.envs.search.settings import SearchEnvSettings
from services.errors import ConfigError, InputError


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> SearchBackend:
    return SearchBackend(SearchEnvSettings(max_turns=4), tmp_path_factory.mktemp("search"))


def test_catalog(backend: SearchBackend):
    info = backend.info()
    assert info.task_types == ["single_hop", "two_hop", "three_hop"]
    assert info.games_per_split["train"] > 3 * info.games_per_split["valid_unseen"] > 0
    assert "BM25" in info.source


def test_expert_wins_every_held_out_question_from_what_it_is_shown(backend: SearchBackend):
    for source in backend.task_types():
        for index in range(backend.pool_size("valid_unseen", source)):
            question = backend.question("valid_unseen", GameChoice(source, index))
            session = backend.open("valid_unseen", GameChoice(source, index), expert=True)
            opening = session.start()
            assert opening.task_type == source and opening.admissible_actions == list(ADMISSIBLE)
            assert opening.observation.endswith(f"Question: {question.question}")
            shown, action, steps = opening.observation, opening.expert_action, 0
            while True:
                assert action is not None
                kind, argument = parse_action(action)
                assert argument in shown  # learnable: named in the question or in a passage shown
                outcome = session.step(action)
                steps += 1
                shown += outcome.observation
                if outcome.done:
                    break
                action = outcome.expert_action
            assert (kind, outcome.won, outcome.reward) == ("answer", True, 1.0)
            assert steps <= len(question.chain) + 1  # fewer when a search also returned a later hop


def test_answers_are_scored_by_exact_match(backend: SearchBackend):
    choice = GameChoice("single_hop", 0)
    answer = backend.question("train", choice).answer
    for given, won in ((f"  the {answer.upper()}. ", True), (f"{answer} city", False)):
        session = backend.open("train", choice, expert=False)
        assert session.start().expert_action is None
        outcome = session.step(f"answer[{given}]")
        assert (outcome.done, outcome.won, outcome.reward, outcome.admissible_actions) == (
            True,
            won,
            float(won),
            [],
        )


def test_searches_return_information_and_the_turn_limit_ends_the_episode(backend: SearchBackend):
    session = backend.open("train", GameChoice("two_hop", 3), expert=False)
    session.start()
    for step in range(1, 5):
        outcome = session.step("search[capital]")
        assert re.match(r"^<information>Doc 1\(Title: [^)]+\) ", outcome.observation)
        assert outcome.observation.count("Doc ") == 3
        assert outcome.done == (step == 4) and outcome.reward == 0.0
    assert "turn limit (4)" in outcome.observation


def test_bad_actions_raise(backend: SearchBackend):
    session = backend.open("train", GameChoice("single_hop", 0), expert=False)
    session.start()
    with pytest.raises(ValueError, match="not a search env action"):
        session.step("go to fridge 1")


def test_question_and_corpus_files_replace_the_generated_ones(tmp_path: Path):
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text(
        '{"id": "0", "contents": "\\"Alpha Town\\"\\nAlpha Town lies on the Beta river."}\n'
        '{"id": "1", "contents": "\\"Beta river\\"\\nThe Beta river flows into the Gamma sea."}\n'
    )
    questions = tmp_path / "qa.jsonl"
    rows = [
        '{"question": "Which river is Alpha Town on?", "golden_answers": ["Beta", "Beta river"], '
        '"data_source": "nq", "split": "test"}',
        '{"question": "Where does the Beta river flow?", "golden_answers": "Gamma sea", '
        '"data_source": "hotpotqa", "split": "train"}',
    ]
    questions.write_text("\n".join(rows) + "\n")
    settings = SearchEnvSettings(corpus_file=corpus, questions_file=questions, topk=1)
    backend = SearchBackend(settings, tmp_path / "cache")
    assert backend.task_types() == ["hotpotqa", "nq"]
    assert backend.info().games_per_split == {"train": 1, "valid_unseen": 1}
    session = backend.open("valid_unseen", GameChoice("nq", 0), expert=True)
    opening = session.start()
    assert opening.expert_action is None and opening.game_id == "valid_unseen/nq/00001"
    assert session.step("search[Alpha Town river]").observation == (
        "<information>Doc 1(Title: Alpha Town) Alpha Town lies on the Beta river.</information>"
    )
    assert session.step("answer[the Beta River]").won  # any golden answer counts
    with pytest.raises(InputError, match="no 'nq' questions in split 'train'"):
        backend.pool_size("train", "nq")
    questions.write_text('{"question": "q", "golden_answers": ["a"], "data_source": "nq", "split": "dev"}\n')
    with pytest.raises(ConfigError, match="split 'dev' is none of"):
        SearchBackend(settings, tmp_path / "cache").task_types()
