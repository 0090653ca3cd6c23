"""The scoring engine interface: token sequences in, the teacher's top-K log-probabilities out.

No Serve import here: the deployment is a thin shell around an engine, and tests construct engines
directly. Position ``i`` of a sequence scores token ``i`` given tokens ``[0, i)``, so it is read from
the model's output at index ``i - 1``.
"""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from services.errors import ConfigError
from services.errors import EngineBrokenError as EngineBrokenError  # its home before services.errors

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ScoreRow:
    """One sequence to score: ``token_ids_T`` and the positions ``positions_P`` (each in [1, T)).

    ``wants_entropy`` False: the caller never reads the entropy (``/v1/completions`` does not return
    it), so an engine may skip the full-vocabulary pass it costs and leave ``entropy_P`` NaN."""

    token_ids_T: IntArray
    positions_P: IntArray
    wants_entropy: bool = True

    @property
    def length(self) -> int:
        return int(self.token_ids_T.shape[0])


@dataclass(frozen=True)
class RowScores:
    """The teacher's verdict on one row's scored positions, in the order they were asked for."""

    top_ids_P_K: IntArray
    top_logprobs_P_K: FloatArray  # descending per row; full-vocabulary log-softmax values
    token_logprob_P: FloatArray  # log-prob of the token actually at each position
    entropy_P: FloatArray  # nats; NaN where the row did not want it and the engine skipped it

    def truncated(self, top_k: int) -> "RowScores":
        """The same scores with only the first ``top_k`` (largest) entries of each position."""
        return RowScores(
            self.top_ids_P_K[:, :top_k],
            self.top_logprobs_P_K[:, :top_k],
            self.token_logprob_P,
            self.entropy_P,
        )


class TeacherEngine(ABC):
    """A loaded teacher that scores rows; implementations own their device and weights."""

    #: True when the engine schedules its own batches (vLLM): the scorer then hands it every row at
    #: once instead of token-budgeted micro-batches.
    schedules_own_batches: bool = False
    _vocab_size: int  # set by each engine's __init__
    _max_context: int

    @property
    def vocab_size(self) -> int:
        """Number of rows of the output head: valid token ids are [0, vocab_size)."""
        return self._vocab_size

    @property
    def max_context(self) -> int:
        """Longest sequence the model accepts (vLLM: one less than its ``max_model_len``)."""
        return self._max_context

    @property
    def max_top_k(self) -> int:
        """Largest top_k the engine can return (the vocabulary, unless the engine caps it)."""
        return self.vocab_size

    @abstractmethod
    def score(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        """Score already-validated rows; raise EngineBrokenError when the engine itself fails."""

    @abstractmethod
    def check_health(self) -> None:
        """Run a tiny forward; raise EngineBrokenError if the engine cannot score any more."""


def checkpoint_dir(model: str) -> Path:
    """The local checkpoint directory ``teacher.model`` names; ConfigError if unset or not a checkpoint."""
    if not model:
        raise ConfigError("teacher.model is not set (the teacher checkpoint directory)")
    path = Path(model)
    if not (path / "config.json").is_file():
        raise ConfigError(f"teacher.model: no checkpoint (config.json) in {model!r}")
    return path
