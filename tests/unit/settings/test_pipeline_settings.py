import pytest

from services.errors import ConfigError
from services.settings import TurnOPDSettings, load_settings


def write(tmp_path, text):
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def test_default_is_the_synchronous_step():
    pipeline = TurnOPDSettings().pipeline
    assert (pipeline.max_staleness, pipeline.stream_teacher) == (0, False)


def test_file_and_environment_set_it(tmp_path, monkeypatch):
    path = write(tmp_path, "[pipeline]\nmax_staleness = 1\nstream_teacher = true\n")
    assert load_settings(path).pipeline.stream_teacher is True
    assert load_settings(path).pipeline.max_staleness == 1
    monkeypatch.setenv("TURNOPD_PIPELINE__STREAM_TEACHER", "false")
    assert load_settings(path).pipeline.stream_teacher is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_staleness = -1", "pipeline.max_staleness: Input should be greater than or equal to 0 (got -1)"),
        ("max_staleness = 9", "pipeline.max_staleness: Input should be less than or equal to 8 (got 9)"),
        ("max_staleness = 'one'", "pipeline.max_staleness: Input should be a valid integer"),
        ("stream = true", "pipeline.stream: unknown key"),
    ],
)
def test_invalid_values_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, f"[pipeline]\n{text}\n"))
    assert message in str(info.value)
