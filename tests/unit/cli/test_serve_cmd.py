"""`turnopd serve teacher` fails in one line, before starting Ray, when the checkpoint is missing."""


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
