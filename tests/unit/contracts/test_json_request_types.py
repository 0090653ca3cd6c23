"""Request bodies parse as their JSON Schema reads them: integers are 3 or 3.0 (never true, "3" or
3.5), booleans true or false (never 0), and bounds stay standard JSON Schema (`minimum`)."""

import pytest
from pydantic import ValidationError

from services.contracts.env_gateway import EpisodeCreate
from services.contracts.teacher import ScoreRequest
from services.envs.search.contract import RetrieveRequest
from services.envs.webshop.contract import ResetQuery


def episode(**fields) -> str:
    return EpisodeCreate.model_validate({"env": "alfworld", "split": "train", **fields}).model_dump_json()


def test_integral_numbers_are_integers_and_booleans_are_only_booleans():
    assert episode(seed=3.0, expert=True) == episode(seed=3, expert=True)
    assert ScoreRequest.model_validate_json(
        '{"sequences": [{"token_ids": [5, 6.0], "positions": [1.0]}], "top_k": 2.0}'
    ).model_dump() == {"sequences": [{"token_ids": [5, 6], "positions": [1]}], "top_k": 2}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"env": "alfworld", "split": "train", "seed": true}', "int_type"),
        ('{"env": "alfworld", "split": "train", "seed": "3"}', "int_type"),
        ('{"env": "alfworld", "split": "train", "seed": 3.5}', "int_from_float"),
        ('{"env": "alfworld", "split": "train", "seed": -1}', "greater_than_equal"),
        ('{"env": "alfworld", "split": "train", "expert": 0}', "bool_type"),
        ('{"env": "alfworld", "split": "train", "expert": "true"}', "bool_type"),
    ],
)
def test_what_json_schema_calls_the_wrong_type_is_refused(body, error):
    with pytest.raises(ValidationError) as refused:
        EpisodeCreate.model_validate_json(body)
    assert next(e["type"] for e in refused.value.errors()) == error


def test_bounds_are_documented_as_minimum():
    seed = EpisodeCreate.model_json_schema()["properties"]["seed"]
    assert seed["anyOf"] == [{"minimum": 0, "type": "integer"}, {"type": "null"}]
    topk = RetrieveRequest.model_json_schema()["properties"]["topk"]
    assert topk["anyOf"] == [{"minimum": 1, "type": "integer"}, {"type": "null"}]
    assert ResetQuery.model_json_schema()["properties"]["env_idx"]["type"] == "integer"
    sequence = ScoreRequest.model_json_schema()["$defs"]["ScoreSequence"]["properties"]
    assert sequence["token_ids"]["items"] == {"minimum": 0, "type": "integer"}
