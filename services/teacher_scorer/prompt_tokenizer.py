"""Text prompts of ``/v1/completions``, tokenised with the tokenizer saved beside the teacher checkpoint.

A run always sends token ids; text arrives from the endpoint client's start-up probe, which compares
the ids a server makes of a text with the student's (vLLM tokenises the same way: the tokenizer's
``__call__``, with its special tokens added unless the request's ``add_special_tokens`` is false).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from services.errors import InputError
from services.models.loading import load_tokenizer
from services.teacher_scorer.engine import checkpoint_dir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# Any of these beside config.json means the checkpoint carries its tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


class PromptTokenizer:
    """The checkpoint's tokenizer, loaded at the first text prompt (a run never sends one)."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._tokenizer: PreTrainedTokenizerBase | None = None

    def __call__(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The text's token ids, with the tokenizer's special tokens (e.g. BOS) unless told otherwise."""
        if self._tokenizer is None:
            if not self._model:
                raise InputError(
                    "this teacher has no tokenizer to read a text prompt (no checkpoint given); send the "
                    "prompt as token ids"
                )
            self._tokenizer = _load(checkpoint_dir(self._model))
        ids: list[int] = self._tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]
        return ids


def _load(path: Path) -> "PreTrainedTokenizerBase":
    if not any((path / name).is_file() for name in _TOKENIZER_FILES):
        raise InputError(
            f"this teacher's checkpoint ({path}) has no tokenizer to read a text prompt; send the prompt "
            "as token ids"
        )
    return load_tokenizer(str(path))
