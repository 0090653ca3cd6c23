"""Settings a vLLM engine would refuse or alter fail at load, naming the key and vLLM's bound."""

import pytest

from services.errors import ConfigError
from services.settings import load_settings


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"models": {"engine": "vllm"}, "rollout": {"temperature": 2.5}},
            r"rollout.temperature with models.engine = 'vllm': vLLM samples at 0 \(greedy\) or in \[0.01, 2\], got 2.5",
        ),
        (
            {"models": {"engine": "vllm"}, "eval": {"val_temperature": 0.001}},
            r"eval.val_temperature with models.engine = 'vllm': .* got 0.001",
        ),
        (
            {"teacher": {"engine": "vllm", "vllm_max_logprobs": 20}, "distill": {"distill_topk": 50}},
            r"distill.distill_topk \(50\) exceeds teacher.vllm_max_logprobs \(20\)",
        ),
    ],
)
def test_values_vllm_refuses_fail_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(None, overrides)


def test_the_same_values_are_fine_for_the_transformers_engines_and_vllms_edges_pass():
    settings = load_settings(None, {"rollout": {"temperature": 2.5}, "eval": {"val_temperature": 0.001}})
    assert (settings.rollout.temperature, settings.eval.val_temperature) == (2.5, 0.001)
    edges = load_settings(
        None,
        {
            "models": {"engine": "vllm"},
            "rollout": {"temperature": 2.0},
            "eval": {"val_temperature": 0.0},
            "teacher": {"engine": "vllm", "vllm_max_logprobs": 50},
            "distill": {"distill_topk": 50},
        },
    )
    assert (edges.rollout.temperature, edges.eval.val_temperature, edges.distill.distill_topk) == (
        2.0,
        0.0,
        50,
    )
