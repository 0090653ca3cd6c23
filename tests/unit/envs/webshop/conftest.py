"""A generated shop of the default size (3000 products, 200 eval + 3000 train goals), built once."""

import pytest

from services.envs.webshop.catalogue import Catalogue, generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.shop import Shop


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return generate_catalogue(0, 3000)


@pytest.fixture(scope="session")
def shop(catalogue: Catalogue) -> Shop:
    return Shop(catalogue, GoalBook(catalogue, GoalSplits(200, 3000)), results_per_page=10, max_results=50)
