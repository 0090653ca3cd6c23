"""`turnopd train`'s progress line: the run's depth and blend, or each task source's."""

from comparison_logs import source_part, step_metrics

from services.cli.train_cmd import depth_text


def test_a_single_source_run_shows_its_controllers_depth_and_blend():
    assert depth_text(step_metrics(1, 2.0, "turnopd")) == "probe H_roll=6   H_hat=6   alpha=0.00"
    assert depth_text(step_metrics(3, 2.0, "turnopd", h_roll=12)) == "      H_roll=12  H_hat=12  alpha=0.00"


def test_a_multi_environment_run_shows_each_sources_own():
    step = step_metrics(3, 2.0, "turnopd").model_copy(
        update={"sources": [source_part("alfworld", 12, 0.25, probe=True), source_part("search", 4, 0.5)]}
    )
    assert depth_text(step) == (
        "alfworld(probe): H_roll=12 H_hat=12 alpha=0.25 search: H_roll=4 H_hat=4 alpha=0.50"
    )
