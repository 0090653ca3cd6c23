"""One vocabulary for the student and every teacher: top-K distillation compares token ids, so a
teacher whose tokenizer maps ids to other strings would teach nonsense. Checked before a run starts."""

from pathlib import Path

from services.errors import ConfigError
from services.models.loading import load_tokenizer
from services.models.registry import resolve_model_dir


def tokenizer_text(reference: str, cache_dir: Path | None, size: int) -> str:
    return f"{reference!r} ({resolve_model_dir(reference, cache_dir)}, vocab {size})"


def check_same_tokenizer(student: str, teachers: dict[str, str], cache_dir: Path | None) -> None:
    """ConfigError naming the key, both tokenizers and their vocab sizes if a teacher's tokenizer
    (``teachers``: config key -> zoo name or path) differs from the student's."""
    mine = load_tokenizer(student, cache_dir)
    vocab = mine.get_vocab()
    for key, teacher in teachers.items():
        theirs = load_tokenizer(teacher, cache_dir)
        if theirs.get_vocab() != vocab:
            raise ConfigError(
                f"{key}: the teacher {tokenizer_text(teacher, cache_dir, len(theirs))} has another tokenizer "
                f"than the student {tokenizer_text(student, cache_dir, len(mine))}; top-K distillation "
                "needs one vocabulary"
            )
