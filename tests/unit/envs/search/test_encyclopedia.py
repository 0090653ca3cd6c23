"""The generated encyclopedia and its questions: deterministic, consistent, disjoint splits."""

from collections import Counter

import pytest

from services.envs.search.encyclopedia import Encyclopedia, generate_encyclopedia
from services.envs.search.questions import DATA_SOURCES, TEMPLATES, follow, generate_questions
from services.envs.search.settings import SearchEnvSettings

SMALL = SearchEnvSettings(countries=4, cities=12, people=40, organisations=9, works=30)


@pytest.fixture(scope="module")
def encyclopedia() -> Encyclopedia:
    return generate_encyclopedia(SMALL)


def test_same_settings_give_the_same_encyclopedia_and_questions(encyclopedia: Encyclopedia):
    again = generate_encyclopedia(SMALL)
    assert again.passages() == encyclopedia.passages()
    assert generate_questions(again, 0, 0.2) == generate_questions(encyclopedia, 0, 0.2)
    other = generate_encyclopedia(SMALL.model_copy(update={"seed": 1}))
    assert [p.text for p in other.passages()] != [p.text for p in encyclopedia.passages()]


def test_sizes_and_unique_name_words(encyclopedia: Encyclopedia):
    kinds = Counter(e.kind for e in encyclopedia.entities.values())
    assert kinds == {"country": 4, "city": 12, "person": 40, "organisation": 9, "work": 30}
    suffixes = {"Press", "Studios", "Records"}
    words = [w for e in encyclopedia.entities.values() for w in e.name.split() if w not in suffixes]
    assert len(words) == len(set(words))  # a name's words appear in no other name


def test_passages_state_every_fact(encyclopedia: Encyclopedia):
    for entity in encyclopedia.entities.values():
        passage = encyclopedia.passage(entity.id)
        assert passage.title == entity.name and passage.contents() == f'"{entity.name}"\n{passage.text}'
        for relation in entity.facts:
            if relation != "occupation" or entity.kind != "person":
                assert encyclopedia.value(entity.id, relation) in passage.text, (entity, relation)
    country = encyclopedia.of_kind("country")[0]
    capital = encyclopedia.target(country.id, "capital")
    assert encyclopedia.target(capital.id, "country").id == country.id
    assert "It is the capital of the country." in encyclopedia.passage(capital.id).text


def test_questions_chain_through_the_passages(encyclopedia: Encyclopedia):
    pools = generate_questions(encyclopedia, 0, 0.25)
    by_name = {e.name: e for e in encyclopedia.entities.values()}
    for (split, source), questions in pools.items():
        assert questions, (split, source)
        hops = DATA_SOURCES.index(source) + 1
        for q in questions:
            assert len(q.chain) == hops and q.data_source == source and q.id.startswith(f"{split}/{source}/")
            assert q.chain[0] in q.question
            # each hop's passage names the next entity; the last states the answer
            for here, there in zip(q.chain, [*q.chain[1:], q.answer], strict=True):
                assert there in encyclopedia.passage(by_name[here].id).text


def test_templates_cover_each_hop_count_and_follow_gives_the_chain(encyclopedia: Encyclopedia):
    assert all(len(t.path) == DATA_SOURCES.index(s) + 1 for s in DATA_SOURCES for t in TEMPLATES[s])
    work = next(e for e in encyclopedia.of_kind("work") if e.subtype == "novel")
    chain, answer = follow(encyclopedia, work, ("creator", "birthplace", "country"))
    author = encyclopedia.target(work.id, "creator")
    city = encyclopedia.target(author.id, "birthplace")
    assert chain == (work.name, author.name, city.name)
    assert answer == encyclopedia.target(city.id, "country").name


def test_train_and_held_out_questions_share_no_subject(encyclopedia: Encyclopedia):
    pools = generate_questions(encyclopedia, 0, 0.25)
    subjects = {
        split: {q.chain[0] for (s, _), qs in pools.items() if s == split for q in qs}
        for split in ("train", "valid_unseen")
    }
    assert subjects["train"] and subjects["valid_unseen"]
    assert not subjects["train"] & subjects["valid_unseen"]
    texts = [q.question for qs in pools.values() for q in qs]
    assert len(texts) == len(set(texts))
