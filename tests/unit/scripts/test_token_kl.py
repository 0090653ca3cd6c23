"""scripts/token_kl.py scores fixed trajectories with each model and the teacher: a model against
itself has no KL, a different model some, split into the token classes."""

import importlib.util
import json
from pathlib import Path

import pytest

from services.models.build import build_zoo
from services.models.loading import load_tokenizer

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("token_kl", REPO / "scripts" / "token_kl.py")
assert _spec is not None and _spec.loader is not None
token_kl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(token_kl)


def test_a_model_against_itself_has_no_kl_and_another_model_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    corpus = ["I see a pen 1. <tool_call> go to desk 1", "take pen 1 from desk 1 <tool_call> put"] * 20
    build_zoo(
        cache_dir=tmp_path, vocab_size=300, corpus=corpus, names=("teacher", "student"), entity_max_number=0
    )
    teacher, student = str(tmp_path / "models" / "teacher"), str(tmp_path / "models" / "student")
    tokenizer = load_tokenizer(teacher)
    prompt = tokenizer.encode("go to desk 1", add_special_tokens=False)
    first = tokenizer.encode("I see a pen 1. <tool_call> go to desk 1", add_special_tokens=False)
    second = tokenizer.encode("I see a pen 1. <tool_call> take pen 1 from desk 1", add_special_tokens=False)
    ids = prompt + first + prompt + second
    turns = [
        {"index": 0, "response_start": len(prompt), "response_end": len(prompt) + len(first)},
        {"index": 1, "response_start": 2 * len(prompt) + len(first), "response_end": len(ids)},
    ]
    path = tmp_path / "held_out.jsonl"
    path.write_text(json.dumps({"token_ids": ids, "turns": turns}) + "\n")

    token_kl.main([str(path), "--teacher", teacher, "--models", teacher, student])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"1 trajectories, teacher {teacher}"
    itself, other = (line.split() for line in lines[2:4])
    assert [float(v) for v in itself[1:5]] == [0.0, 0.0, 0.0, 0.0]
    assert all(float(v) > 0.0 for v in other[1:5])
    assert lines[4].startswith("tokens: novel ") and f"all {len(first) + len(second)}" in lines[4]


def test_an_empty_trajectory_file_is_refused(tmp_path: Path):
    path = tmp_path / "none.jsonl"
    path.write_text("\n")
    with pytest.raises(SystemExit, match="holds no trajectory"):
        token_kl.main([str(path), "--teacher", "x", "--models", "y"])
