"""The run's result as printed at the end of `turnopd train`: the success line and success.png."""

import io

from PIL import Image
from rich.console import Console

from services.cli.result_view import SUCCESS_FIGURE, render_result, write_success_figure
from services.orchestrator.run_result import RunResult, Score


def _result(curve: list[tuple[int, float]]) -> RunResult:
    scores = tuple((step, Score(f"after step {step}", rate, 60)) for step, rate in curve)
    return RunResult(
        before=scores[0][1] if curve[0][0] == 0 else None,
        after=scores[-1][1],
        teacher=Score("teacher", 0.8, 60),
        teacher_note="the teacher's shipped manifest",
        h_hat=[40, 40, 31],
        steps=3,
        curve=scores,
    )


def test_the_result_prints_success_over_the_run_and_whether_the_intervals_separate():
    out = io.StringIO()
    render_result(_result([(0, 6 / 60), (4, 18 / 60), (8, 30 / 60)]), Console(file=out, width=200))
    text = out.getvalue()
    assert (
        "success over the run: step 0 10.0%  [5, 20]  ->  step 4 30.0%  [20, 43]  ->  step 8 50.0%  [38, 62]"
        in text
    )
    assert "the 'after' interval lies above the 'before' interval" in text
    out = io.StringIO()
    render_result(_result([(0, 6 / 60), (8, 9 / 60)]), Console(file=out, width=200))
    assert "the 'after' interval does not lie above the 'before' interval" in out.getvalue()


def test_success_png_is_written_for_two_or_more_evaluations_only(tmp_path):
    path = write_success_figure(_result([(0, 0.1), (4, 0.3), (8, 0.5)]), tmp_path)
    assert path == tmp_path / SUCCESS_FIGURE and path.is_file()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 200
    assert write_success_figure(_result([(8, 0.5)]), tmp_path / "none") is None


def test_success_png_counts_episodes_not_games(tmp_path, monkeypatch):
    """With val_n > 1 an evaluation's episodes are games x n: the title must not call them games."""
    from services.experiments import figures

    titles: list[str] = []
    save = figures._save

    def save_noting_the_title(fig, path):
        titles.append(fig.axes[0].get_title())
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", save_noting_the_title)
    write_success_figure(_result([(0, 0.1), (4, 0.3)]), tmp_path)
    assert titles == ["Student success on the same validation games\n(60 episodes per evaluation)"]
