import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.errors import InputError
from services.models.chat_template import IM_END, IM_START, MARKUP_TOKENS, PAD, SPECIAL_TOKENS
from services.models.corpus import alfworld_corpus, household_entity_tokens
from services.models.loading import load_tokenizer
from services.models.tokenizer_builder import MIN_VOCAB_SIZE, train_tokenizer

SMALL_CORPUS = ["go to countertop 1. take mug 1 from countertop 1. <think>hmm</think>"] * 20


@pytest.fixture(scope="module")
def tokenizer(zoo_cache: Path):
    return load_tokenizer("teacher", zoo_cache)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_any_text_encodes_without_unknown_tokens_and_decodes_back(tokenizer, text: str):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert all(0 <= i < len(tokenizer) for i in ids)
    assert tokenizer.unk_token_id is None
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_household_words_are_single_tokens_and_control_tokens_are_atomic(tokenizer):
    for word in [" countertop", " sinkbasin", " mug", " fridge", "alfworld", " microwave"]:
        assert len(tokenizer.encode(word, add_special_tokens=False)) == 1, word
    for token in (*SPECIAL_TOKENS, *MARKUP_TOKENS):
        assert tokenizer.encode(token, add_special_tokens=False) == [tokenizer.convert_tokens_to_ids(token)]
    assert (tokenizer.eos_token, tokenizer.pad_token) == (IM_END, PAD)
    assert len(tokenizer) <= 8192


def test_household_entities_are_single_tokens_longest_match_first(tokenizer):
    for entity in [" drawer 3", " sinkbasin 1", " drawer 12", " pen 20", " cd 1"]:
        ids = tokenizer.encode(entity, add_special_tokens=False)
        assert len(ids) == 1 and tokenizer.decode(ids) == entity, entity
    ids = tokenizer.encode("go to drawer 12, then pen 1.", add_special_tokens=False)
    pieces = [tokenizer.decode([i]) for i in ids]
    assert " drawer 12" in pieces and " pen 1" in pieces and " drawer 1" not in pieces
    # a name that merely contains another is not split into it
    assert " pen 1" not in [
        tokenizer.decode([i]) for i in tokenizer.encode(" pencil 1", add_special_tokens=False)
    ]


def test_entity_tokens_are_added_and_counted_in_the_vocab_bound():
    entities = household_entity_tokens(3)
    assert entities[:3] == [" alarmclock 1", " alarmclock 2", " alarmclock 3"]
    tokenizer = train_tokenizer(
        SMALL_CORPUS, vocab_size=MIN_VOCAB_SIZE + len(entities) + 40, entity_tokens=entities
    )
    assert len(tokenizer) <= MIN_VOCAB_SIZE + len(entities) + 40
    assert len(tokenizer.encode(" mug 2", add_special_tokens=False)) == 1
    with pytest.raises(InputError, match="entity tokens"):
        train_tokenizer(SMALL_CORPUS, vocab_size=MIN_VOCAB_SIZE + len(entities) - 1, entity_tokens=entities)


def test_chat_template_renders_chatml_with_tools(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tools=[{"type": "function", "function": {"name": "alfworld_step"}}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text.startswith(f"{IM_START}system\nS\n\n# Tools\n<tools>\n")
    assert text.endswith(f"{IM_END}\n{IM_START}user\nU{IM_END}\n{IM_START}assistant\n")


def test_training_is_deterministic_and_respects_the_vocab_bound():
    texts = list(itertools.islice(alfworld_corpus(seed=3), 200))
    first = train_tokenizer(texts, vocab_size=512)
    second = train_tokenizer(texts, vocab_size=512)
    assert first.backend_tokenizer.to_str() == second.backend_tokenizer.to_str()
    assert len(first) == 512


def test_the_corpus_is_pluggable():
    tokenizer = train_tokenizer(["the zyzzyva flew over the quokka"] * 50, vocab_size=MIN_VOCAB_SIZE + 40)
    assert len(tokenizer.encode(" zyzzyva", add_special_tokens=False)) == 1
    assert len(tokenizer.encode(" countertop", add_special_tokens=False)) > 1
    # Control tokens in the corpus are not learnt as merges of their characters.
    assert "think" not in train_tokenizer(SMALL_CORPUS, vocab_size=MIN_VOCAB_SIZE + 40).get_vocab()


def test_too_small_a_vocabulary_is_refused():
    with pytest.raises(InputError, match="vocab_size"):
        train_tokenizer(SMALL_CORPUS, vocab_size=MIN_VOCAB_SIZE - 1)


def test_synthetic_corpus_is_deterministic_per_seed():
    first = list(itertools.islice(alfworld_corpus(seed=1), 30))
    assert first == list(itertools.islice(alfworld_corpus(seed=1), 30))
    assert first != list(itertools.islice(alfworld_corpus(seed=2), 30))
    assert any("You arrive at" in t or "you see" in t for t in first)
