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
