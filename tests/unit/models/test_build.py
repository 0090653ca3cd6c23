import itertools
import json
from pathlib import Path

import pytest
import torch
from transformers import Qwen3ForCausalLM

from services.errors import ConflictError
from services.models.build import MANIFEST, build_zoo
from services.models.corpus import alfworld_corpus
from services.models.loading import load_causal_lm, load_tokenizer
from services.models.zoo import ZOO

CORPUS = list(itertools.islice(alfworld_corpus(seed=0), 300))


def small_build(cache: Path, seed: int, **kwargs) -> dict[str, bool]:
    """A zoo on a small corpus and no entity tokens (fast); returns name -> whether it was built."""
    kwargs.setdefault("entity_max_number", 0)
    artifacts = build_zoo(cache_dir=cache, seed=seed, vocab_size=512, corpus=CORPUS, **kwargs)
    return {a.name: a.built for a in artifacts}


def test_same_seed_gives_bitwise_identical_checkpoints(tmp_path: Path):
    small_build(tmp_path / "a", seed=7)
    small_build(tmp_path / "b", seed=7)
    small_build(tmp_path / "c", seed=8)
    for name in ("teacher", "student"):
        a, b, c = ((tmp_path / x / "models" / name / "model.safetensors").read_bytes() for x in "abc")
        assert a == b
        assert a != c
    assert (tmp_path / "a/models/tokenizer/tokenizer.json").read_bytes() == (
        tmp_path / "b/models/tokenizer/tokenizer.json"
    ).read_bytes()


def test_builds_are_cached_and_only_replaced_with_force(tmp_path: Path):
    assert small_build(tmp_path, seed=1) == {"tokenizer": True, "teacher": True, "student": True}
    assert small_build(tmp_path, seed=1) == {"tokenizer": False, "teacher": False, "student": False}
    with pytest.raises(ConflictError, match="--force"):
        small_build(tmp_path, seed=2)
    assert small_build(tmp_path, seed=2, force=True) == {"tokenizer": True, "teacher": True, "student": True}
    manifest = json.loads((tmp_path / "models/teacher" / MANIFEST).read_text())
    assert (manifest["name"], manifest["seed"], manifest["stage"]) == ("teacher", 2, "init")
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_checkpoints_are_qwen3_in_hugging_face_format(zoo_cache: Path):
    for name, spec in ZOO.items():
        directory = zoo_cache / "models" / name
        assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
            p.name for p in directory.iterdir()
        }
        config = json.loads((directory / "config.json").read_text())
        tokenizer = load_tokenizer(name, zoo_cache)
        assert config["model_type"] == "qwen3"
        assert config["architectures"] == ["Qwen3ForCausalLM"]
        assert config["tie_word_embeddings"] is True
        assert config["vocab_size"] == len(tokenizer)
        assert config["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|im_end|>")
        assert (config["hidden_size"], config["num_hidden_layers"]) == (
            spec.hidden_size,
            spec.num_hidden_layers,
        )


def test_the_teacher_is_bigger_than_the_student(zoo_cache: Path):
    teacher = load_causal_lm("teacher", cache_dir=zoo_cache)
    student = load_causal_lm("student", cache_dir=zoo_cache)
    assert isinstance(teacher, Qwen3ForCausalLM)
    assert teacher.num_parameters() > 3 * student.num_parameters()
    embedded = teacher.get_input_embeddings().weight.numel(), student.get_input_embeddings().weight.numel()
    body = teacher.num_parameters() - embedded[0], student.num_parameters() - embedded[1]
    assert body[0] > 7 * body[1]  # tied embeddings: the transformer itself is 8x the student's
    assert not teacher.training


def test_loading_by_name_and_by_path_gives_the_same_weights(zoo_cache: Path):
    by_name = load_causal_lm("student", cache_dir=zoo_cache)
    by_path = load_causal_lm(str(zoo_cache / "models" / "student"))
    for (name, a), (_, b) in zip(by_name.state_dict().items(), by_path.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    half = load_causal_lm("student", dtype="bfloat16", cache_dir=zoo_cache)
    assert half.dtype == torch.bfloat16
