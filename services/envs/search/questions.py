"""Questions over the generated encyclopedia: single-hop, 2-hop and 3-hop, with their gold chains.

A template names the subject's kind and a relation path; following the path from the subject
gives the answer, and the entities along the way (subject first) form the gold retrieval chain:
hop i reads the passage of chain[i], which names chain[i + 1] (or states the answer). Subjects are
split between train and valid_unseen, so no held-out question is about a train subject.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass

from services.contracts.env_gateway import Split
from services.envs.search.encyclopedia import WORK_KINDS, Encyclopedia, Entity, EntityKind

DATA_SOURCES: tuple[str, ...] = ("single_hop", "two_hop", "three_hop")
SPLITS: tuple[Split, ...] = ("train", "valid_unseen")


@dataclass(frozen=True)
class Question:
    """One question, its gold answers, and the entity names the gold chain searches for, in order
    (empty for questions from a file, which have no known chain and so no expert)."""

    id: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str
    chain: tuple[str, ...]

    @property
    def answer(self) -> str:
        """The answer the expert gives."""
        return self.golden_answers[0]


@dataclass(frozen=True)
class Template:
    kind: EntityKind
    path: tuple[str, ...]
    text: Callable[[Entity], str]


def _work(form: str) -> Callable[[Entity], str]:
    """A work question: ``form`` may use {role}, {made}, {company} (the verb), {subtype}, {name}."""

    def text(e: Entity) -> str:
        kind = WORK_KINDS[e.subtype]
        return form.format(
            role=kind.role, made=kind.made, company=kind.company_verb, subtype=e.subtype, name=e.name
        )

    return text


def _plain(form: str) -> Callable[[Entity], str]:
    return lambda e: form.format(name=e.name)


_THE_COMPANY = "the company that {company} the {subtype} {name}"
TEMPLATES: dict[str, tuple[Template, ...]] = {
    "single_hop": (
        Template("person", ("birthplace",), _plain("Where was {name} born?")),
        Template("person", ("born",), _plain("In what year was {name} born?")),
        Template("person", ("occupation",), _plain("What is the occupation of {name}?")),
        Template("city", ("country",), _plain("In which country is the city of {name}?")),
        Template("city", ("founded",), _plain("In what year was the city of {name} founded?")),
        Template("country", ("capital",), _plain("What is the capital of {name}?")),
        Template("country", ("founder",), _plain("Who founded the country of {name}?")),
        Template("organisation", ("founder",), _plain("Who founded {name}?")),
        Template("organisation", ("headquarters",), _plain("In which city is {name} headquartered?")),
        Template("organisation", ("founded",), _plain("In what year was {name} founded?")),
        Template("work", ("creator",), _work("Who {made} the {subtype} {name}?")),
        Template("work", ("company",), _work("Which company {company} the {subtype} {name}?")),
        Template("work", ("released",), _work("In what year was the {subtype} {name} released?")),
    ),
    "two_hop": (
        Template(
            "work", ("creator", "birthplace"), _work("Where was the {role} of the {subtype} {name} born?")
        ),
        Template(
            "work", ("creator", "born"), _work("In what year was the {role} of the {subtype} {name} born?")
        ),
        Template("work", ("company", "founder"), _work("Who founded " + _THE_COMPANY + "?")),
        Template(
            "work", ("company", "headquarters"), _work("In which city is " + _THE_COMPANY + " headquartered?")
        ),
        Template("person", ("birthplace", "country"), _plain("In which country was {name} born?")),
        Template("organisation", ("founder", "birthplace"), _plain("Where was the founder of {name} born?")),
        Template(
            "organisation", ("headquarters", "country"), _plain("In which country is {name} headquartered?")
        ),
        Template(
            "country", ("capital", "founded"), _plain("In what year was the capital of {name} founded?")
        ),
        Template(
            "country",
            ("founder", "birthplace"),
            _plain("Where was the founder of the country of {name} born?"),
        ),
        Template(
            "city", ("country", "capital"), _plain("What is the capital of the country where {name} lies?")
        ),
        Template(
            "city", ("country", "founder"), _plain("Who founded the country where the city of {name} lies?")
        ),
    ),
    "three_hop": (
        Template(
            "work",
            ("creator", "birthplace", "country"),
            _work("In which country was the {role} of the {subtype} {name} born?"),
        ),
        Template(
            "work",
            ("company", "founder", "birthplace"),
            _work("Where was the founder of " + _THE_COMPANY + " born?"),
        ),
        Template(
            "work",
            ("company", "headquarters", "country"),
            _work("In which country is " + _THE_COMPANY + " headquartered?"),
        ),
        Template(
            "person",
            ("birthplace", "country", "capital"),
            _plain("What is the capital of the country where {name} was born?"),
        ),
        Template(
            "person",
            ("birthplace", "country", "founder"),
            _plain("Who founded the country where {name} was born?"),
        ),
        Template(
            "organisation",
            ("founder", "birthplace", "country"),
            _plain("In which country was the founder of {name} born?"),
        ),
        Template(
            "organisation",
            ("headquarters", "country", "capital"),
            _plain("What is the capital of the country where {name} is headquartered?"),
        ),
    ),
}


def follow(encyclopedia: Encyclopedia, subject: Entity, path: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The chain of entity names read along ``path`` (subject first) and the answer at its end."""
    chain, current = [subject.name], subject
    for relation in path[:-1]:
        current = encyclopedia.target(current.id, relation)
        chain.append(current.name)
    return tuple(chain), encyclopedia.value(current.id, path[-1])


def subject_split(seed: int, entity_id: str, test_fraction: float) -> Split:
    """Which split a subject's questions belong to (a fixed coin per subject and seed)."""
    coin = random.Random(f"turnopd-search-split:{seed}:{entity_id}").random()
    return "valid_unseen" if coin < test_fraction else "train"


def generate_questions(
    encyclopedia: Encyclopedia, seed: int, test_fraction: float
) -> dict[tuple[Split, str], list[Question]]:
    """Every template applied to every subject of its kind, by (split, data source), in a seeded order."""
    pools: dict[tuple[Split, str], list[Question]] = {(s, d): [] for s in SPLITS for d in DATA_SOURCES}
    for source in DATA_SOURCES:
        for template in TEMPLATES[source]:
            for subject in encyclopedia.of_kind(template.kind):
                chain, answer = follow(encyclopedia, subject, template.path)
                split = subject_split(seed, subject.id, test_fraction)
                pools[(split, source)].append(Question("", template.text(subject), (answer,), source, chain))
    ordered = {}
    for (split, source), questions in pools.items():
        random.Random(f"turnopd-search-order:{seed}:{split}:{source}").shuffle(questions)
        ordered[(split, source)] = [
            Question(f"{split}/{source}/{i:05d}", q.question, q.golden_answers, q.data_source, q.chain)
            for i, q in enumerate(questions)
        ]
    return ordered
