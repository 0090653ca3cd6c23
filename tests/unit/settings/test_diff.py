from services.settings.diff import settings_differences, with_defaults


def test_differences_are_dotted_sorted_and_skip_ignored_keys():
    saved = {"optim": {"lr": 1e-3, "steps": 8}, "run": {"run_dir": "a"}, "gone": 1}
    wanted = {"optim": {"lr": 1e-3, "steps": 9}, "run": {"run_dir": "b"}, "new": 2}
    assert settings_differences(saved, wanted) == ["gone", "new", "optim.steps", "run.run_dir"]
    assert settings_differences(saved, wanted, {"run.run_dir", "gone"}) == ["new", "optim.steps"]
    assert settings_differences(saved, saved) == []


def test_missing_keys_take_their_defaults_at_every_depth():
    assert with_defaults({"a": {"b": 1}, "gone": 2}, {"a": {"b": 0, "c": 3}, "d": 4}) == {
        "a": {"b": 1, "c": 3},
        "gone": 2,
        "d": 4,
    }
