"""vLLM's limits, stated once and checked on our side before a request reaches vLLM.

Each constant names the vLLM code it mirrors (vLLM 0.33); tests/unit/vllm_api checks them against
that code where vLLM is importable.
"""

from services.errors import InputError

# SamplingParams._verify_args: "temperature must be in [0, 2]".
MAX_TEMPERATURE = 2.0
# SamplingParams.__post_init__ raises a positive temperature below this (its _MAX_TEMP) to it, so
# the sampled distribution would not be the one asked for.
MIN_POSITIVE_TEMPERATURE = 0.01


def temperature_problem(temperature: float) -> str | None:
    """Why vLLM would not sample at exactly ``temperature``; None when it would."""
    if temperature == 0.0 or MIN_POSITIVE_TEMPERATURE <= temperature <= MAX_TEMPERATURE:
        return None
    return (
        f"vLLM samples at 0 (greedy) or in [{MIN_POSITIVE_TEMPERATURE}, {MAX_TEMPERATURE:g}], "
        f"got {temperature}"
    )


def check_temperature(temperature: float) -> None:
    """InputError unless vLLM samples at exactly ``temperature``."""
    problem = temperature_problem(temperature)
    if problem is not None:
        raise InputError(f"temperature: {problem}")


def prompt_fits(prompt_len: int, max_model_len: int) -> bool:
    """vLLM's rule for a generating model (InputProcessor._validate_prompt_len): a prompt must leave
    room for at least one output token, so it is shorter than ``max_model_len``."""
    return 0 < prompt_len < max_model_len


def scoring_max_model_len(context: int | None, max_positions: int) -> int:
    """vLLM's ``max_model_len`` for scoring sequences of up to ``context`` tokens (None: all the model
    can take). Scoring generates one token (``max_tokens=1``), so vLLM needs one slot more than the
    longest sequence; capped at the model's positions."""
    wanted = (max_positions if context is None else context) + 1
    return min(wanted, max_positions)


def scoring_context(max_model_len: int) -> int:
    """The longest sequence a scoring engine with ``max_model_len`` accepts (see ``prompt_fits``)."""
    return max_model_len - 1
