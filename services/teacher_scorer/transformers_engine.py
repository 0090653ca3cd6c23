"""The `transformers` engine: one padded forward per micro-batch, log-softmax only where scored.

The decoder runs once over the right-padded batch (causal attention: real tokens never see the
padding after them); the output head and an fp32 log-softmax over the full vocabulary then run
only at the hidden states that predict scored positions, in chunks, so the [tokens, vocab] logits
tensor of the whole batch is never materialised.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from services.errors import ConfigError
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import (
    EngineBrokenError,
    RowScores,
    ScoreRow,
    TeacherEngine,
    checkpoint_dir,
)
from services.torch_threads import use_threads

PAD_ID = 0


def resolve_device(name: str) -> torch.device:
    """A torch device from its name; 'auto' is the first GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"teacher.device: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"teacher.device is {name!r} but torch sees no CUDA device")
    return device


def load_teacher_model(path: str | Path, device: str, dtype: str) -> PreTrainedModel:
    """Load a local causal-LM checkpoint for scoring: eval mode, no gradients, on ``device``."""
    where = checkpoint_dir(str(path))
    torch_dtype = getattr(torch, dtype)
    model: Any = AutoModelForCausalLM.from_pretrained(where, dtype=torch_dtype, local_files_only=True)
    model.to(resolve_device(device))
    model.eval()
    model.requires_grad_(False)
    loaded: PreTrainedModel = model
    return loaded


class TransformersEngine(TeacherEngine):
    """Scores rows with a `transformers` causal LM on CPU or GPU."""

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        max_context: int | None = None,
        logits_chunk: int = 2048,
        threads: int | None = None,
    ) -> None:
        self._model = model
        self._threads = threads  # set in each scoring thread: OpenMP counts threads per thread
        self._decoder: Any = model.base_model
        head = model.get_output_embeddings()
        if not isinstance(head, torch.nn.Module):
            raise ConfigError(f"{type(model).__name__} has no output head to score with")
        self._head: torch.nn.Module = head
        config = model.config
        self._softcap: float | None = getattr(config, "final_logit_softcapping", None)
        embeddings: Any = model.get_input_embeddings()
        in_vocab = int(embeddings.weight.shape[0])
        out_vocab = int(getattr(head, "out_features", in_vocab))
        self._vocab_size = min(in_vocab, out_vocab)
        model_context = int(getattr(config, "max_position_embeddings", 0)) or None
        context = max_context or model_context
        if context is None:
            raise ConfigError("teacher.max_context: the model config has no max_position_embeddings; set it")
        self._max_context = context
        self._logits_chunk = logits_chunk
        self._device = next(model.parameters()).device

    @classmethod
    def from_settings(cls, settings: TeacherSettings) -> "TransformersEngine":
        model = load_teacher_model(settings.model, settings.device, settings.dtype)
        return cls(
            model,
            max_context=settings.max_context,
            logits_chunk=settings.logits_chunk,
            threads=settings.threads,
        )

    def score(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        use_threads(self._threads)
        try:
            with torch.inference_mode():
                return self._score(rows, top_k)
        except RuntimeError as exc:  # device errors, CUDA OOM, kernel failures
            raise EngineBrokenError(f"teacher forward failed: {exc}") from exc

    def check_health(self) -> None:
        probe = ScoreRow(np.zeros(2, dtype=np.int64), np.ones(1, dtype=np.int64))
        self.score([probe], 1)

    def _score(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        ids_B_T = self._pad(rows)
        hidden_B_T_H = self._decoder(input_ids=ids_B_T).last_hidden_state
        row_P = torch.cat(
            [torch.full((len(r.positions_P),), b, dtype=torch.long) for b, r in enumerate(rows)]
        )
        pos_P = torch.from_numpy(np.concatenate([r.positions_P for r in rows])).long()
        # The hidden state at index i-1 predicts the token at position i.
        hidden_P_H = hidden_B_T_H[row_P.to(self._device), (pos_P - 1).to(self._device)]
        target_P = ids_B_T[row_P.to(self._device), pos_P.to(self._device)]
        # The entropy's pass over the vocabulary costs a third of the head's time; a batch only of rows
        # that never read it (the OpenAI-compatible route) skips it.
        entropy = any(r.wants_entropy for r in rows)
        chunks = [
            self._score_positions(
                hidden_P_H[s : s + self._logits_chunk], target_P[s : s + self._logits_chunk], top_k, entropy
            )
            for s in range(0, hidden_P_H.shape[0], self._logits_chunk)
        ]
        top_lp, top_id, token_lp, entropy_P = (torch.cat(parts).cpu() for parts in zip(*chunks, strict=True))
        if not (
            torch.isfinite(top_lp).all()
            and torch.isfinite(token_lp).all()
            and (not entropy or torch.isfinite(entropy_P).all())
        ):
            raise EngineBrokenError("teacher produced non-finite log-probabilities (corrupt weights?)")
        return _split_rows(rows, top_id.numpy(), top_lp.numpy(), token_lp.numpy(), entropy_P.numpy())

    def _pad(self, rows: Sequence[ScoreRow]) -> torch.Tensor:
        """The rows right-padded into one batch. No padding mask goes with it: under causal attention
        a real token attends only to the real tokens before it, so the mask changes nothing scored
        (the tests check it bit for bit) while it sends the attention down its masked path, 1.5-2x
        the time of the unmasked pass on CPU (``bench/padded_passes.py``)."""
        longest = max(r.length for r in rows)
        ids_B_T = np.full((len(rows), longest), PAD_ID, dtype=np.int64)
        for b, row in enumerate(rows):
            ids_B_T[b, : row.length] = row.token_ids_T
        return torch.from_numpy(ids_B_T).to(self._device)

    def _score_positions(
        self, hidden_C_H: torch.Tensor, target_C: torch.Tensor, top_k: int, entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        logits_C_V = self._head(hidden_C_H).float()
        if self._softcap:
            logits_C_V = torch.tanh(logits_C_V / self._softcap) * self._softcap
        logp_C_V = torch.log_softmax(logits_C_V, dim=-1)
        top_lp_C_K, top_id_C_K = logp_C_V.topk(top_k, dim=-1)
        token_lp_C = logp_C_V.gather(-1, target_C[:, None]).squeeze(-1)
        if entropy:
            entropy_C = -(logp_C_V.exp() * logp_C_V).sum(-1)
        else:
            entropy_C = torch.full_like(token_lp_C, float("nan"))
        return top_lp_C_K, top_id_C_K, token_lp_C, entropy_C


def _split_rows(
    rows: Sequence[ScoreRow],
    top_id_P_K: np.ndarray,
    top_lp_P_K: np.ndarray,
    token_lp_P: np.ndarray,
    entropy_P: np.ndarray,
) -> list[RowScores]:
    out = []
    start = 0
    for row in rows:
        end = start + len(row.positions_P)
        out.append(
            RowScores(
                top_id_P_K[start:end].astype(np.int64),
                top_lp_P_K[start:end].astype(np.float32),
                token_lp_P[start:end].astype(np.float32),
                entropy_P[start:end].astype(np.float32),
            )
        )
        start = end
    return out
