import json
from pathlib import Path

import pytest

from services.diagnostics.trajectory_args import games_and_decoder
from services.models.build import build_zoo
from services.models.loading import load_tokenizer


def test_games_come_from_the_file_and_ids_decode_with_the_models_tokenizer(tmp_path: Path):
    corpus = ["go to desk 1", "take pen 1 from desk 1"] * 20
    build_zoo(cache_dir=tmp_path, vocab_size=300, corpus=corpus, names=("student",), entity_max_number=0)
    model = tmp_path / "models" / "student"
    tokenizer = load_tokenizer(str(model))
    ids = tokenizer.encode("go to desk 1", add_special_tokens=False)
    trajectories = tmp_path / "games.jsonl"
    trajectories.write_text(
        json.dumps({"token_ids": ids, "success": True}) + "\n\n" + json.dumps({"x": 1}) + "\n"
    )
    games, decode = games_and_decoder("test", [str(trajectories), "--model", str(model)])
    assert list(games) == [{"token_ids": ids, "success": True}, {"x": 1}]
    assert decode(ids) == "go to desk 1"


def test_the_model_is_required(tmp_path: Path):
    with pytest.raises(SystemExit):
        games_and_decoder("test", [str(tmp_path / "games.jsonl")])
