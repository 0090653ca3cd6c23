"""The generation engine interface: batched sampling from token-id prompts, with sampler log-probs.

Log-prob convention (both engines): for every generated token, the log-probability under the
distribution it was actually sampled from, i.e. ``log_softmax(logits / temperature)`` at that
position, with no top-k/top-p truncation. At ``temperature == 0`` (greedy) the argmax is taken and
the log-prob is that of the unscaled ``log_softmax(logits)``. The learner's importance ratio and
the rollout's probe statistics both rely on this.

No Ray, no torch at import: workers, tests and the vLLM backend share this module.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from services.errors import ConflictError, InputError
from services.settings.models import EngineKind

if TYPE_CHECKING:
    import torch

__all__ = ["EngineKind", "Generation", "GenerationEngine", "GenerationParams"]

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters shared by one batch of requests."""

    max_new_tokens: int
    temperature: float = 1.0
    seed: int | None = None  # None: the engine's seed, advanced on every call

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0.0:
            raise InputError(f"temperature must be >= 0, got {self.temperature}")


@dataclass(frozen=True)
class Generation:
    """One request's output: sampled ids (a stop token included), their log-probs, why it ended."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise InputError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} log-probs")


class GenerationEngine(ABC):
    """Generates continuations for many episodes at once; holds versioned weights."""

    kind: EngineKind

    def __init__(self, stop_token_ids: Sequence[int]) -> None:
        if not stop_token_ids:
            raise InputError("a generation engine needs at least one stop token id")
        self._stop = tuple(dict.fromkeys(int(t) for t in stop_token_ids))
        self._version = 0

    @abstractmethod
    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        """Sample one continuation per prompt, stopping at a stop token or ``max_new_tokens``."""

    @abstractmethod
    def load_weights(
        self, state_dict: Mapping[str, "torch.Tensor"], version: int, *, rewind: bool = False
    ) -> None:
        """Replace the model weights (e.g. published by the learner) and set ``weights_version``: a
        later version, or with ``rewind`` any (a run that went back to a checkpoint)."""

    @property
    def weights_version(self) -> int:
        """The version of the weights now generating (0: as loaded from the checkpoint)."""
        return self._version

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Token ids that end a response (``<|im_end|>`` and the model's eos ids), each once."""
        return self._stop

    @property
    @abstractmethod
    def max_positions(self) -> int:
        """The longest sequence (prompt + response) the model can attend over."""


def validate_prompts(prompts: Sequence[Sequence[int]], vocab_size: int) -> None:
    """Reject empty batches, empty prompts and ids outside the vocabulary."""
    if not prompts:
        raise InputError("generate needs at least one prompt")
    for i, prompt in enumerate(prompts):
        if not prompt:
            raise InputError(f"prompt {i} is empty")
        bad = [t for t in prompt if not 0 <= t < vocab_size]
        if bad:
            raise InputError(f"prompt {i} holds ids outside the vocabulary [0, {vocab_size}): {bad[:5]}")


def next_version(current: int, version: int, rewind: bool = False) -> int:
    """Check that a weight update moves forward (``rewind``: a run went back to a checkpoint's
    weights, any version >= 0 goes)."""
    if rewind:
        if version < 0:
            raise ConflictError(f"weights version must be >= 0, got {version}")
        return version
    if version <= current:
        raise ConflictError(f"weights version must increase: now {current}, got {version}")
    return version
