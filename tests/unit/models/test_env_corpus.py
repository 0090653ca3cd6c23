from collections import Counter

from services.envs.search.encyclopedia import generate_encyclopedia
from services.envs.search.questions import generate_questions
from services.envs.search.settings import SearchEnvSettings
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import make_goal
from services.envs.webshop.settings import WebShopSettings
from services.models.corpus import household_entity_tokens
from services.models.env_corpus import PASSAGE_REPEATS, search_corpus, webshop_corpus, zoo_corpus
from services.models.tokenizer_builder import train_tokenizer


def test_search_text_is_the_passages_and_only_training_questions():
    settings = SearchEnvSettings()
    encyclopedia = generate_encyclopedia(settings)
    texts = Counter(search_corpus(settings))
    passages = [p.contents() for p in encyclopedia.passages()]
    assert passages and all(texts[p] == PASSAGE_REPEATS for p in passages)
    pools = generate_questions(encyclopedia, settings.seed, settings.test_fraction)
    train = {q.question for (split, _), qs in pools.items() if split == "train" for q in qs}
    test = {q.question for (split, _), qs in pools.items() if split != "train" for q in qs}
    assert train and train <= set(texts)
    assert not (test - train) & set(texts)  # no held-out question's wording is learnt


def test_webshop_text_is_training_instructions_and_every_product_page():
    settings = WebShopSettings(products=60, goals_eval=5, goals_train=20)
    texts = list(webshop_corpus(settings))
    catalogue = generate_catalogue(settings.catalogue_seed, settings.products)
    train = [make_goal(catalogue, g).instruction for g in range(5, 25)]
    assert texts[:20] == train
    held_out = {make_goal(catalogue, g).instruction for g in range(5)} - set(train)
    assert held_out and not held_out & set(texts)
    assert all(any(p.title in t and p.asin not in t for t in texts[20:80]) for p in catalogue.products)
    assert sum(p.asin in t for t in texts for p in catalogue.products) == 60  # results pages list each once


def test_the_zoo_tokenizer_keeps_encyclopedia_names_short_and_household_text_unchanged():
    texts = list(zoo_corpus(seed=0))
    mixed = train_tokenizer(texts, 8192, household_entity_tokens(20))
    household = train_tokenizer(texts[:3000], 8192, household_entity_tokens(20))

    def length(tokenizer, text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    titles = [p.title for p in generate_encyclopedia(SearchEnvSettings()).passages()]
    mean_mixed = sum(length(mixed, " " + t) for t in titles) / len(titles)
    mean_household = sum(length(household, " " + t) for t in titles) / len(titles)
    assert mean_mixed < 3.0 < 2 * mean_mixed < mean_household
    sample = texts[:200]
    assert sum(length(mixed, t) for t in sample) <= 1.03 * sum(length(household, t) for t in sample)
