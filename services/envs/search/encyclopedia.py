"""A generated encyclopedia of fictional entities whose facts chain (pure, deterministic from a seed).

Countries have a capital city and a founder; cities lie in a country; people are born in a city;
organisations (publishers, studios, labels) have a founder and a headquarters city; works (novels,
films, albums) have a creator and a company. Each entity has one passage stating its facts, so a
question like "In which country was the author of the novel X born?" needs three retrievals:
X's passage names the author, the author's passage names the city, the city's the country.
"""

import random
from dataclasses import dataclass
from typing import Literal

from services.envs.search.names import WordMint
from services.envs.search.settings import SearchEnvSettings

EntityKind = Literal["country", "city", "person", "organisation", "work"]


@dataclass(frozen=True)
class WorkKind:
    """Who makes a kind of work and how questions and passages say it."""

    occupation: str
    role: str
    made: str
    made_participle: str
    company_verb: str


WORK_KINDS: dict[str, WorkKind] = {
    "novel": WorkKind("novelist", "author", "wrote", "written", "published"),
    "film": WorkKind("film director", "director", "directed", "directed", "produced"),
    "album": WorkKind("composer", "composer", "composed", "composed", "released"),
}
ORGANISATION_KINDS: dict[str, tuple[str, str]] = {
    # work subtype: (name suffix, description)
    "novel": ("Press", "publishing house"),
    "film": ("Studios", "film studio"),
    "album": ("Records", "record label"),
}
OTHER_OCCUPATIONS = ("architect", "painter", "physicist", "chemist", "historian", "engineer", "economist")


@dataclass(frozen=True)
class Entity:
    """One entry: ``facts`` maps a relation to an entity id or a literal (a year, an occupation)."""

    id: str
    kind: EntityKind
    name: str
    subtype: str
    facts: dict[str, str]


@dataclass(frozen=True)
class Passage:
    """One retrievable document: an entity's article."""

    id: str
    title: str
    text: str

    def contents(self) -> str:
        """Search-R1's corpus format: the quoted title, a newline, the text."""
        return f'"{self.title}"\n{self.text}'


class Encyclopedia:
    """Entities by id, with the passage of each."""

    def __init__(self, entities: list[Entity]) -> None:
        self.entities = {e.id: e for e in entities}

    def of_kind(self, kind: EntityKind) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]

    def target(self, entity_id: str, relation: str) -> Entity:
        """The entity a relation points to."""
        return self.entities[self.entities[entity_id].facts[relation]]

    def value(self, entity_id: str, relation: str) -> str:
        """What a relation says, as text: the target's name, or the literal."""
        fact = self.entities[entity_id].facts[relation]
        return self.entities[fact].name if fact in self.entities else fact

    def passage(self, entity_id: str) -> Passage:
        e = self.entities[entity_id]
        v = lambda relation: self.value(entity_id, relation)  # noqa: E731
        match e.kind:
            case "country":
                text = (
                    f"{e.name} is a country. The capital of {e.name} is {v('capital')}. "
                    f"{e.name} was founded in {v('founded')} by {v('founder')}."
                )
            case "city":
                text = f"{e.name} is a city in {v('country')}, founded in {v('founded')}."
                if self.target(e.facts["country"], "capital").id == e.id:
                    text += " It is the capital of the country."
            case "person":
                text = (
                    f"{e.name} is {_article(e.subtype)} {e.subtype}. "
                    f"{e.name} was born in {v('born')} in the city of {v('birthplace')}."
                )
            case "organisation":
                description = next(d for s, d in ORGANISATION_KINDS.values() if e.name.endswith(s))
                text = (
                    f"{e.name} is a {description} headquartered in {v('headquarters')}. "
                    f"It was founded in {v('founded')} by {v('founder')}."
                )
            case "work":
                kind = WORK_KINDS[e.subtype]
                text = (
                    f"{e.name} is {_article(e.subtype)} {e.subtype} {kind.made_participle} by {v('creator')}. "
                    f"It was {kind.company_verb} by {v('company')} in {v('released')}."
                )
            case _:
                raise ValueError(f"unknown entity kind {e.kind!r}")
        return Passage(e.id, e.name, text)

    def passages(self) -> list[Passage]:
        return [self.passage(i) for i in self.entities]


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def generate_encyclopedia(settings: SearchEnvSettings) -> Encyclopedia:
    """The encyclopedia the settings describe; identical for identical settings."""
    rng = random.Random(f"turnopd-search-encyclopedia:{settings.seed}")
    mint = WordMint(rng)
    countries = [f"country-{i:04d}" for i in range(settings.countries)]
    cities = [f"city-{i:04d}" for i in range(settings.cities)]
    people = [f"person-{i:05d}" for i in range(settings.people)]
    entities: list[Entity] = []

    # People first: occupations decide who can create which kind of work.
    creators = {kind.occupation for kind in WORK_KINDS.values()}
    occupations = [*sorted(creators), *OTHER_OCCUPATIONS]
    person_facts: dict[str, dict[str, str]] = {}
    person_rows: list[tuple[str, str, str]] = []
    for i, pid in enumerate(people):
        occupation = occupations[i % len(occupations)] if i < len(occupations) else rng.choice(occupations)
        name = f"{mint.word()} {mint.word()}"
        person_facts[pid] = {
            "birthplace": rng.choice(cities),
            "born": str(rng.randint(1900, 1990)),
            "occupation": occupation,
        }
        person_rows.append((pid, name, occupation))

    # Countries: every country gets a distinct capital; founders are historical (born long ago).
    capitals = rng.sample(cities, len(countries))
    founders = rng.sample(people, len(countries))
    city_country = {capital: country for capital, country in zip(capitals, countries, strict=True)}
    for city in cities:
        city_country.setdefault(city, rng.choice(countries))
    for cid, capital, founder in zip(countries, capitals, founders, strict=True):
        founded = rng.randint(1600, 1850)
        person_facts[founder]["born"] = str(founded - rng.randint(25, 60))
        facts = {"capital": capital, "founder": founder, "founded": str(founded)}
        entities.append(Entity(cid, "country", mint.word(), "", facts))
    for city in cities:
        facts = {"country": city_country[city], "founded": str(rng.randint(1100, 1900))}
        entities.append(Entity(city, "city", mint.word(), "", facts))

    # Organisations, one kind per work subtype in turn; founders are born before the founding.
    subtypes = list(WORK_KINDS)
    organisations: dict[str, list[str]] = {s: [] for s in subtypes}
    for i in range(settings.organisations):
        subtype = subtypes[i % len(subtypes)]
        oid = f"organisation-{i:04d}"
        founder = rng.choice(people)
        founded = int(person_facts[founder]["born"]) + rng.randint(25, 50)
        facts = {"founder": founder, "headquarters": rng.choice(cities), "founded": str(founded)}
        name = f"{mint.word()} {ORGANISATION_KINDS[subtype][0]}"
        entities.append(Entity(oid, "organisation", name, subtype, facts))
        organisations[subtype].append(oid)

    # Works: the creator has the matching occupation; released during the creator's life.
    by_occupation: dict[str, list[str]] = {}
    for pid, _, occupation in person_rows:
        by_occupation.setdefault(occupation, []).append(pid)
    for i in range(settings.works):
        subtype = subtypes[i % len(subtypes)]
        creator = rng.choice(by_occupation[WORK_KINDS[subtype].occupation])
        released = min(2024, int(person_facts[creator]["born"]) + rng.randint(20, 55))
        facts = {"creator": creator, "company": rng.choice(organisations[subtype]), "released": str(released)}
        entities.append(Entity(f"work-{i:05d}", "work", f"{mint.word()} {mint.word()}", subtype, facts))

    entities += [Entity(pid, "person", name, occ, person_facts[pid]) for pid, name, occ in person_rows]
    return Encyclopedia(entities)
