"""The driver's side of a resume (``pipeline._resume``, ``_cumulative_before``) over a run directory on disk."""

import json
from types import SimpleNamespace

import pytest
import torch
from checkpoint_fixtures import write_checkpoint, write_metrics
from step_fakes import FakePool

from services.errors import InputError
from services.orchestrator import pipeline
from services.orchestrator.source_mix import StepSources
from services.run_dir import METRICS_FILE, RunDir
from services.settings.tree import TurnOPDSettings


class Controller:
    def __init__(self):
        self.rewound: list[tuple[int, str | None]] = []

    def rewind(self, step, env=None):
        self.rewound.append((step, env))


SOURCES = StepSources.of(TurnOPDSettings())


def stack_resumed_at(step: int) -> SimpleNamespace:
    return SimpleNamespace(
        settings=TurnOPDSettings(), learner=SimpleNamespace(resumed_step=step), controller=Controller(),
        pool=FakePool(),
    )  # fmt: skip


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setattr(pipeline.ray, "put", lambda value: value)


def test_resume_publishes_the_checkpoint_the_learner_resumed_from_not_the_newest(tmp_path, no_ray):
    run = RunDir(tmp_path)
    write_metrics(tmp_path, range(1, 6))
    write_checkpoint(tmp_path, 2)
    damaged = write_checkpoint(tmp_path, 4)
    (damaged / "model.safetensors").write_bytes(b"\x10\x00")  # the learner skipped it, resumed at 2
    stack = stack_resumed_at(2)
    assert pipeline._resume(stack, run, SOURCES, last_logged=5, first_checkpoint=2) == 2
    [(weights, version)] = stack.pool.published
    assert version == 2 and torch.equal(weights["w"], torch.full((4,), 2.0))
    assert run.steps_logged() == [1, 2] and stack.controller.rewound == [(2, None)]


def test_resume_refuses_to_start_over_with_the_logs_intact(tmp_path, no_ray):
    run = RunDir(tmp_path)
    write_metrics(tmp_path, range(1, 6))
    stack = stack_resumed_at(0)
    with pytest.raises(InputError, match=r"would start over at step 0 and erase the logs of steps 1\.\.5"):
        pipeline._resume(stack, run, SOURCES, last_logged=5, first_checkpoint=2)
    assert run.steps_logged() == [1, 2, 3, 4, 5] and stack.pool.published == []


def test_resume_from_step_0_before_any_checkpoint_cuts_the_logs_and_publishes_nothing(tmp_path, no_ray):
    run = RunDir(tmp_path)
    write_metrics(tmp_path, range(1, 2))
    stack = stack_resumed_at(0)
    assert pipeline._resume(stack, run, SOURCES, last_logged=1, first_checkpoint=2) == 0
    assert run.steps_logged() == [] and stack.pool.published == []


def test_the_cumulative_time_before_a_resume_skips_a_torn_last_line(tmp_path, caplog):
    run = RunDir(tmp_path)
    assert pipeline._cumulative_before(run) == 0.0
    write_metrics(tmp_path, range(1, 4))
    with run.path(METRICS_FILE).open("a") as fh:
        fh.write(json.dumps({"step": 4, "cumulative_s": 40.0})[:12])
    assert pipeline._cumulative_before(run) == 30.0
    assert "dropped its torn last line" in caplog.text
