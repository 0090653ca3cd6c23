"""The CLI's error boundary: an expected error is one line and exit 2, with the notes added on the way up."""

import typer
from checkpoint_fixtures import write_checkpoint, write_metrics

from services.cli.errors_boundary import EXIT_BAD_INPUT, run_app
from services.cli.train_cmd import resume_hint
from services.errors import InputError
from services.learner.checkpoint import checkpoint_dir


def test_an_error_prints_its_message_then_each_note_as_a_hint(capsys):
    app = typer.Typer()

    @app.command()
    def fail() -> None:
        error = InputError("the learner's node was lost")
        error.add_note("resume it")
        raise error

    assert run_app(app, []) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.splitlines() == ["error: the learner's node was lost", "hint: resume it"]


def test_the_resume_hint_names_the_checkpoint_a_resume_takes(tmp_path):
    assert "has no checkpoint yet" in resume_hint(tmp_path)
    for step in (2, 4):
        write_checkpoint(tmp_path, step)
    checkpoint_dir(tmp_path, 6).mkdir()  # incomplete: no state file
    write_metrics(tmp_path, range(1, 5))
    assert resume_hint(tmp_path) == (
        f"the run goes on from its checkpoint of step 4 with: turnopd train --resume {tmp_path}"
    )
    # step 4 saved but never logged (the run stopped in between): the resume drops it, goes on from 2
    write_metrics(tmp_path, range(1, 4))
    assert "from its checkpoint of step 2 with" in resume_hint(tmp_path)
    (checkpoint_dir(tmp_path, 2) / "optimizer.pt").write_bytes(b"")  # damaged: a resume skips it
    assert resume_hint(tmp_path).startswith(
        f"no checkpoint of a logged step in {tmp_path / 'checkpoints'} is intact"
    )
