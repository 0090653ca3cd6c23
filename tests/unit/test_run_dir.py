"""The run directory's logs: appended and synced, cut back atomically on resume, torn last lines dropped."""

import json
import logging
import os
from pathlib import Path

import pytest

from services.errors import InputError
from services.run_dir import DECISIONS_FILE, EVAL_FILE, METRICS_FILE, RunDir
from services.settings import TurnOPDSettings


def line(step: int, **extra: object) -> str:
    return json.dumps({"step": step, **extra}, separators=(",", ":"))


def logged(run: RunDir, name: str, steps: range) -> str:
    text = "".join(line(k, loss=k / 10) + "\n" for k in steps)
    run.path(name).write_text(text)
    return text


def test_truncate_after_keeps_each_kept_line_as_it_was_written(tmp_path: Path):
    run = RunDir(tmp_path)
    text = logged(run, METRICS_FILE, range(1, 6))
    run.path(EVAL_FILE).write_text('{"step": 2,  "spaced": true}\n{"step": 4}\n')
    run.truncate_after(3)
    assert run.path(METRICS_FILE).read_text() == "".join(text.splitlines(keepends=True)[:3])
    assert run.path(EVAL_FILE).read_text() == '{"step": 2,  "spaced": true}\n'
    assert run.steps_logged() == [1, 2, 3] and run.steps_logged(DECISIONS_FILE) == []


def test_a_kill_during_truncate_leaves_the_old_log_whole_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    run = RunDir(tmp_path)
    text = logged(run, METRICS_FILE, range(1, 6))

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt("killed before the rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        run.truncate_after(2)
    assert run.path(METRICS_FILE).read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == [METRICS_FILE]


def test_truncate_syncs_the_new_text_before_the_rename_and_the_directory_after(
    tmp_path: Path, synced: list[str]
):
    run = RunDir(tmp_path)
    logged(run, METRICS_FILE, range(1, 6))
    run.truncate_after(2)
    assert len(synced) == 2
    assert Path(synced[0]).parent == tmp_path and Path(synced[0]).name.startswith(f".{METRICS_FILE}.")
    assert synced[1] == str(tmp_path)
    assert run.steps_logged() == [1, 2]


def test_append_syncs_each_line_and_a_new_file_s_directory(tmp_path: Path, synced: list[str]):
    run = RunDir(tmp_path)
    run.append(METRICS_FILE, line(1))
    run.append(METRICS_FILE, line(2))
    log = str(tmp_path / METRICS_FILE)
    assert synced == [log, str(tmp_path), log]
    assert run.steps_logged() == [1, 2]


def test_a_torn_last_line_is_dropped_said_once_and_repaired_by_the_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    run = RunDir(tmp_path)
    whole = logged(run, METRICS_FILE, range(1, 4))
    with run.path(METRICS_FILE).open("a") as fh:
        fh.write('{"step":4,"lo')  # power lost mid-append
    with caplog.at_level(logging.WARNING, logger="services.run_dir"):
        assert run.steps_logged() == [1, 2, 3]
        assert [r["step"] for r in run.records(METRICS_FILE)] == [1, 2, 3]
        run.truncate_after(3)
    assert run.path(METRICS_FILE).read_text() == whole
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1
    assert str(run.path(METRICS_FILE)) in notices[0] and "dropped its torn last line" in notices[0]


def test_a_complete_last_line_without_its_newline_is_kept_and_the_cut_adds_the_newline(tmp_path: Path):
    run = RunDir(tmp_path)
    run.path(METRICS_FILE).write_text(line(1) + "\n" + line(2))
    assert run.steps_logged() == [1, 2]
    run.truncate_after(5)
    assert run.path(METRICS_FILE).read_text() == line(1) + "\n" + line(2) + "\n"


def test_a_torn_line_cut_inside_a_utf8_character_is_dropped_too(tmp_path: Path):
    run = RunDir(tmp_path)
    run.path(EVAL_FILE).write_bytes((line(1) + "\n").encode() + '{"step":2,"env":"é'.encode()[:-1])
    assert run.steps_logged(EVAL_FILE) == [1]


def test_a_bad_line_before_the_last_is_damage_named_by_file_and_line(tmp_path: Path):
    run = RunDir(tmp_path)
    run.path(METRICS_FILE).write_text(line(1) + "\n" + '{"step":2,"lo\n' + line(3) + "\n")
    for read in (run.steps_logged, lambda: run.truncate_after(1)):
        with pytest.raises(InputError, match=rf"^{run.path(METRICS_FILE)}:2: not a valid log line"):
            read()
    assert run.path(METRICS_FILE).read_text().count("\n") == 3  # left as it was


def test_a_line_without_an_integer_step_is_named_too(tmp_path: Path):
    run = RunDir(tmp_path)
    run.path(METRICS_FILE).write_text(line(1) + "\n" + '{"loss": 1}\n')
    with pytest.raises(InputError, match=rf"{run.path(METRICS_FILE)}:2: .*integer step"):
        run.steps_logged()


def test_create_writes_the_config_without_secrets_and_refuses_a_directory_with_logs(tmp_path: Path):
    run = RunDir(tmp_path / "run")
    settings = TurnOPDSettings.model_validate(
        {"security": {"service_token": "s3cret-token"}, "controller": {"redis_password": "s3cret-pw"}}
    )
    run.create(settings)
    saved = json.loads(run.saved_config())
    assert "s3cret" not in run.saved_config()
    assert "service_token" not in saved["security"] and "redis_password" not in saved["controller"]
    assert saved["optim"] == json.loads(settings.model_dump_json())["optim"]
    run.append(METRICS_FILE, line(1))
    with pytest.raises(InputError, match="already holds a run"):
        run.create(settings)
