import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from services.errors import InputError
from services.models.build import MANIFEST, build_zoo
from services.models.entity_init import (
    KIND_WEIGHT,
    NUMBER_WEIGHT,
    OWN_WEIGHT,
    compose_entity_embeddings,
    composed_rows,
    entity_parts,
)
from services.models.loading import load_tokenizer
from tests.unit.models.test_build import CORPUS


def test_entity_parts_split_the_kind_word_from_the_number():
    assert entity_parts(" pen 2") == (" pen", " 2")
    assert entity_parts(" sinkbasin 12") == (" sinkbasin", " 12")
    for bad in (" pen", " 2", "pen two", " pen 2a"):
        with pytest.raises(InputError, match="numbered entity"):
            entity_parts(bad)


def test_composed_rows_mix_unit_directions_at_the_own_norm():
    eye = torch.eye(3)
    own = 3.0 * eye[2:3]
    row = composed_rows(own, kind=5.0 * eye[0:1], number=0.1 * eye[1:2])
    weights = torch.tensor([KIND_WEIGHT, NUMBER_WEIGHT, OWN_WEIGHT])
    assert torch.allclose(row[0], 3.0 * weights / weights.norm())
    assert row.norm().item() == pytest.approx(3.0)


def test_only_entity_rows_change_and_they_are_read_from_the_rows_before():
    vocab = {" pen": 0, " 2": 1, " pen 2": 2, " desk": 3, " 1": 4, " desk 1": 5, " a": 6}
    embeddings = torch.randn(7, 16, generator=torch.Generator().manual_seed(0))
    before = embeddings.clone()

    def encode(text: str) -> list[int]:
        return [vocab[text]]

    assert compose_entity_embeddings(embeddings, [" pen 2", " desk 1"], encode) == 2
    for untouched in (0, 1, 3, 4, 6):
        assert torch.equal(embeddings[untouched], before[untouched])
    expected = composed_rows(before[[2, 5]], before[[0, 3]], before[[1, 4]])
    assert torch.allclose(embeddings[[2, 5]], expected)
    assert F.cosine_similarity(embeddings[2], before[0], dim=0) > 0.6


def test_an_entity_the_tokenizer_splits_is_an_error():
    embeddings = torch.zeros(4, 8)
    with pytest.raises(InputError, match="2 tokens, not one"):
        compose_entity_embeddings(embeddings, [" pen 2"], lambda text: [0, 1] if text == " pen 2" else [0])
    assert not embeddings.any()  # refused before anything was written


def _entity_build(cache: Path, entity_embeddings: str) -> tuple[dict[str, torch.Tensor], dict]:
    build_zoo(
        cache_dir=cache,
        seed=3,
        vocab_size=1024,
        corpus=CORPUS,
        names=("student",),
        entity_max_number=2,
        entity_embeddings=entity_embeddings,
    )
    directory = cache / "models" / "student"
    return load_file(directory / "model.safetensors"), json.loads((directory / MANIFEST).read_text())


def test_a_composed_zoo_starts_each_entity_near_its_kind_word(tmp_path: Path):
    random_weights, random_manifest = _entity_build(tmp_path / "random", "random")
    composed_weights, composed_manifest = _entity_build(tmp_path / "composed", "composed")
    assert "entity_embeddings" not in random_manifest  # caches built before the setting stay valid
    assert composed_manifest["entity_embeddings"] == "composed"
    tokenizer = load_tokenizer(str(tmp_path / "composed" / "models" / "student"))

    def ids(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    key = "model.embed_tokens.weight"
    plain, composed = random_weights[key], composed_weights[key]
    entity_ids = {i for n in (1, 2) for name in (" pen", " drawer", " book") for i in ids(f"{name} {n}")}
    assert len(entity_ids) == 6
    changed = {int(i) for i in (plain != composed).any(dim=1).nonzero()}
    assert entity_ids <= changed
    assert not changed & set(ids(" pen") + ids(" 2") + ids(" a"))

    def cosine(weights: torch.Tensor, a: str, b: str) -> float:
        return F.cosine_similarity(weights[ids(a)].mean(0), weights[ids(b)].mean(0), dim=0).item()

    assert cosine(composed, " pen 2", " pen") > 0.7
    assert cosine(composed, " pen 2", " pen 1") > 0.5
    assert abs(cosine(plain, " pen 2", " pen")) < 0.3
    assert abs(cosine(composed, " pen 2", " book 1")) < 0.3
    for name in ("model.layers.0.mlp.up_proj.weight", "model.norm.weight"):
        assert torch.equal(random_weights[name], composed_weights[name])


def test_an_unknown_entity_embeddings_value_is_an_error(tmp_path: Path):
    with pytest.raises(InputError, match="'random' or 'composed'"):
        build_zoo(
            cache_dir=tmp_path, corpus=CORPUS, vocab_size=512, entity_max_number=0, entity_embeddings="sum"
        )
