"""The search env's data on disk: the generated encyclopedia as a Search-R1 corpus
(``corpus.jsonl``: one ``{"id", "contents"}`` per line, the format retrieval servers load) and
its questions (``questions.jsonl``: id, split, data_source, question, golden_answers, chain).

Both are generated once into the cache (questions last: their file marks a complete build) and
read by every env worker and by the retrieval server.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from services.contracts.env_gateway import Split
from services.env_gateway.game_cache import atomic_write_text, ensure_file
from services.env_gateway.search.encyclopedia import generate_encyclopedia
from services.env_gateway.search.questions import DATA_SOURCES, SPLITS, Question, generate_questions
from services.errors import ConfigError
from services.settings.search_env import SearchEnvSettings

GENERATOR_VERSION = 1
CORPUS_FILE = "corpus.jsonl"
QUESTIONS_FILE = "questions.jsonl"


@dataclass(frozen=True)
class SearchDataset:
    """Corpus documents ``(id, contents)`` and questions by (split, data source)."""

    documents: list[tuple[str, str]]
    questions: dict[tuple[Split, str], list[Question]]


def dataset_dir(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    return cache_dir / "search" / f"v{GENERATOR_VERSION}-{settings.corpus_key()}"


def ensure_dataset(settings: SearchEnvSettings, cache_dir: Path) -> Path:
    """The dataset directory, generated first if it is not complete yet."""
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
                "golden_answers": [q.answer],
                "chain": list(q.chain),
            }
            for (split, _), questions in pools.items()
            for q in questions
        ]
        atomic_write_text(questions_path, "".join(json.dumps(r) + "\n" for r in rows))

    ensure_file(directory / QUESTIONS_FILE, build)
    return directory


def read_corpus(path: Path) -> list[tuple[str, str]]:
    """``(id, contents)`` of every line of a Search-R1 corpus file."""
    documents = []
    try:
        with path.open() as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    row = json.loads(line)
                    documents.append((str(row.get("id", number - 1)), str(row["contents"])))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot read the corpus {path}: {type(exc).__name__}: {exc}") from None
    return documents


def read_questions(path: Path) -> dict[tuple[Split, str], list[Question]]:
    pools: dict[tuple[Split, str], list[Question]] = {(s, d): [] for s in SPLITS for d in DATA_SOURCES}
    try:
        with path.open() as handle:
            for line in handle:
                row = json.loads(line)
                question = Question(
                    row["id"],
                    row["question"],
                    row["golden_answers"][0],
                    row["data_source"],
                    tuple(row["chain"]),
                )
                pools[(row["split"], row["data_source"])].append(question)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise ConfigError(f"cannot read the questions {path}: {type(exc).__name__}: {exc}") from None
    return pools


def load_dataset(settings: SearchEnvSettings, cache_dir: Path) -> SearchDataset:
    """The generated corpus and questions (generating them into the cache on first use)."""
    directory = ensure_dataset(settings, cache_dir)
    return SearchDataset(read_corpus(directory / CORPUS_FILE), read_questions(directory / QUESTIONS_FILE))
