"""`turnopd serve ...`: the teacher fails in one line, before starting Ray, when the checkpoint is
missing; the env gateway takes a config file or the settings a run wrote."""

import pytest


def test_serve_teacher_without_a_checkpoint(cli, tmp_path):
    result = cli("serve", "teacher")
    assert result.code == 2
    assert result.err.strip() == "error: teacher.model is not set (the teacher checkpoint directory)"
    result = cli("serve", "teacher", "--model", tmp_path / "nowhere", "--port", "8123")
    assert result.code == 2
    assert (
        result.err.strip() == f"error: teacher.model: no checkpoint (config.json) in '{tmp_path / 'nowhere'}'"
    )


def test_serve_teacher_rejects_bad_options(cli, tmp_path):
    result = cli("serve", "teacher", "--model", tmp_path, "--engine", "onnx")
    assert result.code == 2
    assert "teacher.engine: Input should be 'transformers' or 'vllm'" in result.err


def test_serve_help_lists_teacher(cli):
    result = cli("serve", "--help")
    assert result.code == 0 and "teacher" in result.out


def test_public_binds_without_a_service_token_fail_in_one_line(cli, tiny_teacher, monkeypatch):
    monkeypatch.delenv("TURNOPD_SERVICE_TOKEN", raising=False)
    result = cli("serve", "env-gateway", "--host", "0.0.0.0")
    assert result.code == 2
    assert result.err.strip() == (
        "error: refusing to start the env gateway on 0.0.0.0 without a service token: set "
        "TURNOPD_SERVICE_TOKEN (or [security] service_token), or bind 127.0.0.1"
    )
    result = cli("serve", "teacher", "--model", tiny_teacher, "--host", "0.0.0.0")
    assert result.code == 2
    assert result.err.strip().startswith("error: refusing to start the teacher on 0.0.0.0 without a service")


def test_serve_webshop_is_registered_and_checks_its_options(cli, tmp_path):
    result = cli("serve", "webshop", "--help")
    assert result.code == 0 and "--max-envs" in result.out and "agentenv_webshop" in result.out
    config = tmp_path / "c.toml"
    config.write_text("[env_gateway.webshop]\nproducts = 5\n")
    result = cli("serve", "webshop", "--config", config)
    assert result.code == 2 and "env_gateway.webshop.products" in result.err


def test_a_gateway_takes_the_settings_a_run_wrote_and_the_flags_given(tmp_path):
    from services.cli.serve_cmd import gateway_settings
    from services.errors import ConfigError, InputError
    from services.settings.env_gateway import EnvGatewaySettings

    written = EnvGatewaySettings.model_validate({"workers": 3, "search": {"max_turns": 10, "topk": 2}})
    path = tmp_path / "env_gateway.settings.json"
    path.write_text(written.model_dump_json(indent=2))
    assert gateway_settings(None, path, {"host": None, "port": None, "workers": None}) == written
    moved = gateway_settings(None, path, {"host": "127.0.0.1", "port": 4321, "workers": None})
    assert moved == written.model_copy(update={"port": 4321})

    with pytest.raises(InputError, match="do not combine it with --config"):
        gateway_settings(tmp_path / "c.toml", path, {})
    with pytest.raises(InputError, match="settings file not found"):
        gateway_settings(None, tmp_path / "none.json", {})
    path.write_text('{"workers": 0}')
    with pytest.raises(ConfigError, match="workers: Input should be greater than or equal to 1"):
        gateway_settings(None, path, {})
