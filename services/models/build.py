"""Build the tiny model zoo into the cache: one tokenizer, then one checkpoint per zoo model.

Each output directory carries a manifest (``turnopd_build.json``) naming what it was built from
(seed, spec, corpus and tokenizer fingerprints). A directory whose manifest matches the request is
reused; one that does not is only replaced with ``force``. Directories are written next to their
final place and renamed in, so a crash never leaves a half-written checkpoint under a model name.
"""

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from services.atomic_directory import atomic_directory
from services.errors import ConflictError, InputError
from services.models.corpus import household_entity_tokens
from services.models.entity_init import compose_entity_embeddings
from services.models.env_corpus import zoo_corpus
from services.models.registry import models_dir
from services.models.tokenizer_builder import train_tokenizer
from services.models.zoo import init_model, qwen3_config, zoo_spec

if TYPE_CHECKING:
    import torch

BUILD_FORMAT = 3
MANIFEST = "turnopd_build.json"
TOKENIZER_DIR = "tokenizer"
TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class BuiltArtifact:
    """One zoo directory after a build: ``built`` is False when a matching cached one was reused."""

    name: str
    path: Path
    built: bool
    num_parameters: int | None = None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def corpus_fingerprint(texts: Sequence[str]) -> str:
    """A hash of the training texts, order included."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def model_seed(seed: int, name: str) -> int:
    """A per-model seed, so the teacher and student do not share an initial random stream."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:4], "big")


def read_manifest(directory: Path) -> dict[str, Any] | None:
    path = directory / MANIFEST
    if not path.is_file():
        return None
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _reusable(target: Path, wanted: dict[str, Any], force: bool) -> bool:
    """True when ``target`` already holds exactly ``wanted``; refuse to clobber a different build."""
    if force or not target.exists():
        return False
    if read_manifest(target) == wanted:
        return True
    raise ConflictError(f"{target} holds a different build (or foreign files); pass --force to replace it")


def _install(build_in: Callable[[Path], None], target: Path) -> None:
    """Run ``build_in(tmp)`` on a sibling temp dir, then swap it in place of ``target``."""
    with atomic_directory(target) as tmp:
        build_in(tmp)


def build_zoo(
    cache_dir: Path | None = None,
    seed: int = 0,
    vocab_size: int = 8192,
    force: bool = False,
    names: Sequence[str] = ("teacher", "student"),
    corpus: Iterable[str] | None = None,
    on_step: Callable[[str], None] | None = None,
    entity_max_number: int = 20,
    entity_embeddings: str = "random",
) -> list[BuiltArtifact]:
    """Build (or reuse) the zoo tokenizer and the named checkpoints under ``<cache>/models/``.

    ``corpus`` replaces the default text of every env backend (``services.models.env_corpus``).
    ``on_step`` is called with a short description before each step (for progress bars).
    ``entity_max_number``: household entities ``" <name> <n>"`` for ``n <= entity_max_number``
    are single tokens (0: none; see ``train_tokenizer``).
    ``entity_embeddings``: ``random`` (the default init) or ``composed`` (each entity row starts
    from its kind and number; see ``services.models.entity_init``).
    """
    if entity_embeddings not in ("random", "composed"):
        raise InputError(f"entity_embeddings must be 'random' or 'composed', got {entity_embeddings!r}")
    step = on_step or (lambda _: None)
    root = models_dir(cache_dir)
    step("synthesising the tokenizer corpus")
    texts = list(zoo_corpus(seed) if corpus is None else corpus)
    entities = household_entity_tokens(entity_max_number)
    tokenizer_dir = root / TOKENIZER_DIR
    wanted: dict[str, Any] = {
        "format": BUILD_FORMAT,
        "kind": "tokenizer",
        "vocab_size": vocab_size,
        "corpus_sha256": corpus_fingerprint(texts),
        "entity_tokens_sha256": corpus_fingerprint(entities),
    }
    step("training the tokenizer")
    results = []
    if _reusable(tokenizer_dir, wanted, force):
        results.append(BuiltArtifact(TOKENIZER_DIR, tokenizer_dir, built=False))
    else:

        def write_tokenizer(tmp: Path) -> None:
            train_tokenizer(texts, vocab_size, entities).save_pretrained(tmp)
            _write_manifest(tmp, wanted)

        _install(write_tokenizer, tokenizer_dir)
        results.append(BuiltArtifact(TOKENIZER_DIR, tokenizer_dir, built=True))
    tokenizer_sha = _sha256((tokenizer_dir / TOKENIZER_FILE).read_bytes())
    composed = entities if entity_embeddings == "composed" else None
    for name in names:
        step(f"building the {name} checkpoint")
        results.append(_build_model(root, name, seed, tokenizer_dir, tokenizer_sha, force, composed))
    return results


def _build_model(
    root: Path,
    name: str,
    seed: int,
    tokenizer_dir: Path,
    tokenizer_sha: str,
    force: bool,
    composed: Sequence[str] | None,
) -> BuiltArtifact:
    """``composed``: the entity tokens whose rows start composed (None: all random; the manifest
    then has no ``entity_embeddings`` key, as before that setting existed)."""
    from transformers import AutoTokenizer

    spec = zoo_spec(name)
    target = root / name
    wanted: dict[str, Any] = {
        "format": BUILD_FORMAT,
        "kind": "model",
        "name": name,
        "stage": "init",
        "seed": seed,
        "spec": spec.as_dict(),
        "tokenizer_sha256": tokenizer_sha,
    }
    if composed is not None:
        wanted["entity_embeddings"] = "composed"
    if _reusable(target, wanted, force):
        return BuiltArtifact(name, target, built=False)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = qwen3_config(spec, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    model = init_model(config, model_seed(seed, name))
    if composed is not None:
        compose_entity_embeddings(
            cast("torch.Tensor", model.get_input_embeddings().weight),
            composed,
            lambda text: tokenizer.encode(text, add_special_tokens=False),
        )

    def write_model(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _write_manifest(tmp, wanted)

    _install(write_model, target)
    return BuiltArtifact(name, target, built=True, num_parameters=model.num_parameters())
