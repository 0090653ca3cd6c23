"""The /v1/completions subset: JSON round trips, a vLLM-shaped answer parses, requests take vLLM's
fields and stay strict about other names."""

import pytest
from pydantic import ValidationError

from services.contracts.completions import CompletionRequest, CompletionResponse

# The shape vLLM's server sends for prompt [5, 7, 9] with prompt_logprobs=2 and return_token_ids
# (keys of each position are token ids as strings; fields outside our subset are ignored).
VLLM_ANSWER = """{
  "id": "cmpl-1", "object": "text_completion", "created": 1764200000, "model": "teacher",
  "choices": [{
    "index": 0, "text": "!", "logprobs": null, "finish_reason": "length", "stop_reason": null,
    "token_ids": [11], "routed_experts": null,
    "prompt_logprobs": [
      null,
      {"7": {"logprob": -0.5, "rank": 1, "decoded_token": "a"},
       "3": {"logprob": -1.25, "rank": 2, "decoded_token": "b"}},
      {"4": {"logprob": -0.25, "rank": 1, "decoded_token": "c"},
       "8": {"logprob": -2.0, "rank": 2, "decoded_token": "d"},
       "9": {"logprob": -3.5, "rank": 6, "decoded_token": "e"}}
    ],
    "prompt_token_ids": [5, 7, 9]
  }],
  "service_tier": null, "system_fingerprint": null,
  "usage": {"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": null},
  "kv_transfer_params": null
}"""


def test_a_vllm_answer_parses_with_token_id_keys():
    response = CompletionResponse.model_validate_json(VLLM_ANSWER)
    choice = response.choices[0]
    assert choice.prompt_logprobs is not None
    assert choice.prompt_logprobs[0] is None
    assert choice.prompt_logprobs[2] is not None
    assert sorted(choice.prompt_logprobs[2]) == [4, 8, 9]
    assert choice.prompt_logprobs[2][9]["logprob"] == -3.5
    assert choice.prompt_logprobs[2][9]["rank"] == 6
    assert choice.prompt_token_ids == [5, 7, 9]
    assert response.usage is not None and response.usage.prompt_tokens == 3


def test_response_round_trips_through_json():
    response = CompletionResponse.model_validate_json(VLLM_ANSWER)
    again = CompletionResponse.model_validate_json(response.model_dump_json())
    assert again == response


@pytest.mark.parametrize("prompt", [[1, 2, 3], [[1, 2, 3], [4, 5]]], ids=["one sequence", "a batch"])
def test_request_round_trips_and_reads_as_a_batch(prompt):
    request = CompletionRequest(model="m", prompt=prompt, prompt_logprobs=20)
    again = CompletionRequest.model_validate_json(request.model_dump_json())
    assert again == request
    assert again.prompts == (prompt if isinstance(prompt[0], list) else [prompt])


def test_a_text_prompt_round_trips_and_has_no_token_ids_yet():
    request = CompletionRequest(prompt="Hello <|im_start|>", prompt_logprobs=1, return_token_ids=True)
    assert CompletionRequest.model_validate_json(request.model_dump_json()) == request
    with pytest.raises(ValueError, match="text prompt has no token ids"):
        _ = request.prompts


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"prompt": [1, 2], "prompt_logprobs": 0}, "prompt_logprobs"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "max_tokens": 5}, "max_tokens"),
        ({"prompt": [1], "prompt_logprobs": 5}, "prompt"),
        ({"prompt": "", "prompt_logprobs": 5}, "prompt"),
        ({"prompt": ["two", "texts"], "prompt_logprobs": 5}, "prompt"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "temprature": 0.5}, "temprature"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "best_of": 2}, "best_of"),  # OpenAI's; not vLLM's
        ({"prompt": [1, 2], "prompt_logprobs": 5, "n": 3}, "n = 3 cannot be honoured"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "truncate_prompt_tokens": -2}, "truncate_prompt_tokens"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "truncation_side": "middle"}, "truncation_side"),
        ({"prompt": [1, 2], "prompt_logprobs": 5, "temperature": "hot"}, "temperature"),
        ({"prompt": [1, -2], "prompt_logprobs": 5}, "prompt"),
    ],
)
def test_requests_outside_the_subset_are_refused(body, field):
    with pytest.raises(ValidationError, match=field):
        CompletionRequest.model_validate(body)


def test_a_token_id_beyond_int32_is_refused():
    with pytest.raises(ValidationError, match="less than 2147483648"):
        CompletionRequest.model_validate({"prompt": [[0, 2**63]], "prompt_logprobs": 1})


def test_a_request_with_vllms_fields_round_trips():
    request = CompletionRequest(
        prompt=[[1, 2, 3]],
        prompt_logprobs=2,
        temperature=0.0,
        seed=-1,
        stop=["a", "b"],
        logit_bias={"7": -1.5},
        truncate_prompt_tokens=-1,
        truncation_side="right",
        n=1,
        stream=False,
        response_format={"type": "text"},
    )
    again = CompletionRequest.model_validate_json(request.model_dump_json())
    assert again == request
    assert (again.temperature, again.stop, again.truncate_prompt_tokens) == (0.0, ["a", "b"], -1)


def test_the_requests_we_send_are_unchanged_by_the_added_fields():
    """Every field beyond the subset defaults to None, so a client's body (exclude_none) is as before."""
    request = CompletionRequest(
        model="m", prompt=[[1, 2]], prompt_logprobs=3, max_tokens=1, return_token_ids=True
    )
    assert request.model_dump_json(exclude_none=True) == (
        '{"model":"m","prompt":[[1,2]],"prompt_logprobs":3,"max_tokens":1,"return_token_ids":true}'
    )


def test_a_refused_value_is_named_with_why():
    with pytest.raises(ValidationError) as caught:
        CompletionRequest.model_validate(
            {"prompt": [1, 2], "prompt_logprobs": 5, "logprobs": 5, "echo": True}
        )
    messages = {error["loc"]: error["msg"] for error in caught.value.errors()}
    assert messages == {
        (
            "logprobs",
        ): "Value error, logprobs = 5 cannot be honoured: log-probs of generated tokens, and this "
        "app generates none; use prompt_logprobs",
        ("echo",): "Value error, echo = true cannot be honoured: this app writes no text nor `logprobs`; "
        "prompt_logprobs has the prompt's",
    }
