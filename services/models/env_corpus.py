"""Tokenizer training text of every env backend: household, plus the search and webshop defaults.

The zoo tokenizer serves every env backend, so it learns their words too: the generated
encyclopedia's passages (repeated, so its made-up names become one or two tokens instead of a
dozen letters: a query the model copies from the question is then a short copy) and the training
questions, and the generated shop's training instructions and product pages. Only training
questions and goals are used; the encyclopedia is the retrieval corpus, which the agent reads
anyway. Both come from the default env settings, so the text is fixed by the code. Pure module:
no I/O, no torch.
"""

from collections.abc import Iterator
from itertools import chain

from services.agent.tool_calls import ToolSpec, format_tool_call
from services.envs.protocols import SEARCH_PROTOCOL, WEBSHOP_PROTOCOL
from services.envs.search.encyclopedia import generate_encyclopedia
from services.envs.search.questions import generate_questions
from services.envs.search.settings import SearchEnvSettings
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import make_goal
from services.envs.webshop.pages import item_page, results_page
from services.envs.webshop.settings import WebShopSettings
from services.models.corpus import alfworld_corpus, tool_schema_text

PASSAGE_REPEATS = 3
RESULTS_PER_PAGE = 10
RESULT_PAGES = 5  # WebShop keeps the top 50 results: 5 pages of 10


def zoo_corpus(seed: int) -> Iterator[str]:
    """The zoo tokenizer's default text: household (seeded), then search and webshop."""
    return chain(alfworld_corpus(seed), search_corpus(), webshop_corpus())


def search_corpus(settings: SearchEnvSettings | None = None) -> Iterator[str]:
    """The encyclopedia's passages (``PASSAGE_REPEATS`` times) and its training questions."""
    settings = settings or SearchEnvSettings()
    encyclopedia = generate_encyclopedia(settings)
    passages = [passage.contents() for passage in encyclopedia.passages()]
    for _ in range(PASSAGE_REPEATS):
        yield from passages
    pools = generate_questions(encyclopedia, settings.seed, settings.test_fraction)
    for (split, _source), questions in sorted(pools.items()):
        if split == "train":
            yield from (question.question for question in questions)
    yield from _protocol_texts(SEARCH_PROTOCOL.system_prompt, SEARCH_PROTOCOL.tool, "query")


def webshop_corpus(settings: WebShopSettings | None = None) -> Iterator[str]:
    """Training instructions, each product's page under one of them, and results pages."""
    settings = settings or WebShopSettings()
    catalogue = generate_catalogue(settings.catalogue_seed, settings.products)
    first = settings.goals_eval
    instructions = [
        make_goal(catalogue, goal_id).instruction for goal_id in range(first, first + settings.goals_train)
    ]
    yield from instructions
    products = catalogue.products
    for index, product in enumerate(products):
        yield item_page(instructions[index % len(instructions)], product)
    for start in range(0, len(products), RESULTS_PER_PAGE):
        page = start // RESULTS_PER_PAGE + 1
        listed = products[start : start + RESULTS_PER_PAGE]
        yield results_page(instructions[page % len(instructions)], page, RESULT_PAGES, len(products), listed)
    yield from _protocol_texts(WEBSHOP_PROTOCOL.system_prompt, WEBSHOP_PROTOCOL.tool, "search[shoes]")


def _protocol_texts(system_prompt: str, tool: ToolSpec, example: str) -> list[str]:
    """The protocol's fixed prompt text, repeated like the household chat text (cheap to encode)."""
    return ["system\n" + system_prompt, tool_schema_text(tool), format_tool_call(example, tool)] * 20
