"""A run scoring on our own teacher app as an OpenAI-compatible endpoint, whose server is stopped
at the start of step 2 and started again 30 s after the step's scoring first found it down: the
step waits through the client's bounded back-off and goes on. Every step is logged once with its weights version, no episode is lost, and the
controller's decisions equal an independent replay of the run's probes."""

import logging
import threading
import time
from pathlib import Path

import pytest
from controller_replay import assert_decisions_equal_replay
from in_process_teacher import LoopbackTeacher
from rollout_fixtures import override_sections, short_run, smoke_config, zoo_cache_dir

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.contracts.records import TurnStatsRecord
from services.orchestrator.pipeline import train
from services.run_dir import RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
STEPS = 4
OUTAGE_S = 30.0


class FailedCalls(logging.Handler):
    """Counts the endpoint client's failed attempts (its retry warnings) as they happen."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.first = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("teacher endpoint call failed"):
            self.count += 1
            self.first.set()


def endpoint_config(tmp_path: Path, url: str) -> Path:
    """configs/smoke.toml on the test caches, STEPS steps, scored on ``url``; the client's back-off
    (1, 2, 4, 4, ... s over 16 attempts: about a minute) outlasts the outage."""
    teacher = (
        f'[teacher]\nendpoint_url = "{url}"\nendpoint_model = "teacher"\nmax_context = 4096\n'
        "client_max_attempts = 16\nclient_backoff_s = 1.0\nclient_max_backoff_s = 4.0\n"
    )
    overrides = short_run(STEPS, "rollout_workers = 1").replace("[teacher]\nnum_cpus = 0.25\n", teacher)
    path = smoke_config(tmp_path)
    path.write_text(override_sections(path.read_text(), overrides))
    return path


def test_a_teacher_endpoint_down_30_s_mid_run_loses_and_repeats_no_step(ray_session, tmp_path):
    server = LoopbackTeacher(zoo_cache_dir() / "models" / "teacher")
    server.start()
    failed = FailedCalls()
    client_log = logging.getLogger("services.teacher_scorer.endpoint_client")
    client_log.addHandler(failed)
    outage: dict[str, float] = {}

    def down_then_up() -> None:
        server.stop()
        outage["stopped"] = time.monotonic()
        failed.first.wait(timeout=600)  # a step found it down: it stays down OUTAGE_S from there
        outage["found"] = time.monotonic()
        time.sleep(OUTAGE_S)
        server.start()
        outage["started"] = time.monotonic()

    restarter = threading.Thread(target=down_then_up, daemon=True)

    def on_step(m: StepMetrics) -> None:
        if m.step == 1:  # down from the start of step 2, before its trajectories are scored
            restarter.start()

    try:
        settings = load_settings(endpoint_config(tmp_path, server.url))
        assert settings.teacher.endpoint_url == server.url and settings.optim.steps == STEPS
        run = RunDir(settings.run.run_dir)
        run.create(settings.model_dump_json())
        assert train(settings, run, on_step, lambda _: None) == STEPS
        restarter.join(timeout=60)
    finally:
        client_log.removeHandler(failed)
        server.stop()

    # the server was down, a step found it so and waited the outage through
    assert outage["started"] - outage["found"] >= OUTAGE_S and outage["found"] >= outage["stopped"]
    assert failed.first.is_set() and failed.count >= 2
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))  # none lost, none repeated
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 and m.trajectories == settings.optim.batch for m in metrics)
    assert max(m.times.teacher_s for m in metrics) >= OUTAGE_S - 1.0  # the scoring that waited
    assert [r.step for r in read_jsonl(run.path("turn_stats.jsonl"), TurnStatsRecord)] == list(
        range(1, STEPS + 1)
    )
    decisions = assert_decisions_equal_replay(run.root, STEPS, settings.depth)
    assert [m.h_bar for m in metrics] == [d.h_bar for d in decisions]
