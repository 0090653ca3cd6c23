"""The search env's data on disk: the generated encyclopedia as a Search-R1 corpus
(``corpus.jsonl``: one ``{"id", "contents"}`` per line, the format retrieval servers load) and
its questions (``questions.jsonl``: one ``{"id", "split", "data_source", "question",
"golden_answers", "chain"}`` per line).

Both are generated once into the cache (questions last: their file marks a complete build) and
read by every env worker and by the retrieval server. Files of the same formats can be given
instead (``corpus_file``, ``questions_file``), e.g. Search-R1's Wikipedia corpus and NQ/HotpotQA
questions; a question file's ``split`` is ``train`` or ``valid_unseen`` (``test`` is read as
``valid_unseen``), and without ``chain`` a question has no expert.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from services.contracts.env_gateway import Split
from services.envs.game_cache import atomic_write_text, ensure_file
from services.envs.search.encyclopedia import generate_encyclopedia
from services.envs.search.questions import Question, generate_questions
from services.envs.search.settings import SearchEnvSettings
from services.errors import ConfigError

GENERATOR_VERSION = 1
CORPUS_FILE = "corpus.jsonl"
QUESTIONS_FILE = "questions.jsonl"
_SPLITS: dict[str, Split] = {"train": "train", "valid_unseen": "valid_unseen", "test": "valid_unseen"}

QuestionPools = dict[tuple[Split, str], list[Question]]


@dataclass(frozen=True)
class SearchDataset:
    """Corpus documents ``(id, contents)`` and questions by (split, data source)."""

    documents: list[tuple[str, str]]
    questions: QuestionPools


def dataset_dir(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    return cache_dir / "search" / f"v{GENERATOR_VERSION}-{settings.corpus_key()}"


def ensure_dataset(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    """The generated dataset's directory, generated first if it is not complete yet."""
    directory = dataset_dir(settings, cache_dir)

    def build(questions_path: Path) -> None:
        encyclopedia = generate_encyclopedia(settings)
        passages = encyclopedia.passages()
        corpus = "".join(json.dumps({"id": p.id, "contents": p.contents()}) + "\n" for p in passages)
        atomic_write_text(directory / CORPUS_FILE, corpus)
        pools = generate_questions(encyclopedia, settings.seed, settings.test_fraction)
        rows = [
            {
                "id": q.id,
                "split": split,
                "data_source": q.data_source,
                "question": q.question,
                "golden_answers": list(q.golden_answers),
                "chain": list(q.chain),
            }
            for (split, _), questions in pools.items()
            for q in questions
        ]
        atomic_write_text(questions_path, "".join(json.dumps(r) + "\n" for r in rows))

    ensure_file(directory / QUESTIONS_FILE, build)
    return directory


def corpus_path(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    """The corpus the settings name: ``corpus_file``, else the generated encyclopedia's."""
    if settings.corpus_file is not None:
        return settings.corpus_file.expanduser()
    return ensure_dataset(settings, cache_dir) / CORPUS_FILE


def questions_path(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    """The question set the settings name: ``questions_file``, else the generated questions."""
    if settings.questions_file is not None:
        return settings.questions_file.expanduser()
    return ensure_dataset(settings, cache_dir) / QUESTIONS_FILE


def read_corpus(path: Path) -> list[tuple[str, str]]:
    """``(id, contents)`` of every line of a Search-R1 corpus file (ids default to the line index)."""
    documents = []
    try:
        with path.open() as handle:
            for number, line in enumerate(handle):
                if line.strip():
                    row = json.loads(line)
                    documents.append((str(row.get("id", number)), str(row["contents"])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the corpus {path}: {type(exc).__name__}: {exc}") from None
    return documents


def read_questions(path: Path) -> QuestionPools:
    """Questions by (split, data source), in file order."""
    pools: QuestionPools = {}
    try:
        with path.open() as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                row = json.loads(line)
                split = _SPLITS.get(row["split"])
                if split is None:
                    raise ValueError(f"line {number}: split {row['split']!r} is none of {sorted(_SPLITS)}")
                answers = row["golden_answers"]
                answers = (answers,) if isinstance(answers, str) else tuple(str(a) for a in answers)
                if not answers:
                    raise ValueError(f"line {number}: no golden_answers")
                source = str(row["data_source"])
                question = Question(
                    str(row.get("id", f"{split}/{source}/{number:05d}")),
                    str(row["question"]),
                    answers,
                    source,
                    tuple(row.get("chain", ())),
                )
                pools.setdefault((split, source), []).append(question)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the questions {path}: {type(exc).__name__}: {exc}") from None
    return pools


def load_dataset(settings: SearchEnvSettings, cache_dir: Path) -> SearchDataset:
    """The corpus and questions the settings name (generating the encyclopedia on first use)."""
    return SearchDataset(
        read_corpus(corpus_path(settings, cache_dir)), read_questions(questions_path(settings, cache_dir))
    )
