from services.learner.checkpoint import STATE_FILE, drop_checkpoints_after, latest_checkpoint


def test_drop_checkpoints_after_keeps_older_ones(tmp_path):
    root = tmp_path / "checkpoints"
    for name in ("step_000002", "step_000004", "step_000006.tmp"):
        (root / name).mkdir(parents=True)
        (root / name / STATE_FILE).write_text("{}")
    dropped = drop_checkpoints_after(tmp_path, 3)
    assert [p.name for p in dropped] == ["step_000004", "step_000006.tmp"]
    assert sorted(p.name for p in root.iterdir()) == ["step_000002"]
    assert latest_checkpoint(tmp_path).name == "step_000002"
    assert drop_checkpoints_after(tmp_path / "none", 0) == []
