"""A multi-environment run on the tiny zoo: one student, three task sources (household games,
search, the shop), each with its own teacher app, controller, depth and share of the batch.

The shop's teacher is an OpenAI-compatible endpoint (our app served over HTTP from this process),
stopped at the start of step 3 and started again 30 s after that step's scoring first found it
down: the step waits through the client's bounded back-off and goes on, losing and repeating nothing.
"""

import shutil
import threading
import time
from pathlib import Path

import pytest
from controller_replay import assert_decisions_equal_replay
from in_process_teacher import EndpointFailures, LoopbackTeacher
from prometheus_client.parser import text_string_to_metric_families
from ray import serve
from rollout_fixtures import smoke_config, zoo_cache_dir

from services.contracts.controller import StepDecision
from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord
from services.envs.webshop.vocabulary import CATEGORIES
from services.operations.run_client import submit_restart
from services.orchestrator.pipeline import train
from services.run_dir import RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
OUTAGE_S = 30.0
# the endpoint client's back-off (1, 2, 4, 4, ... s over 16 attempts: about a minute) outlasts the outage
ENDPOINT_CLIENT = "client_max_attempts = 16\nclient_backoff_s = 1.0\nclient_max_backoff_s = 4.0\n"

SOURCES = """
[[sources]]
env = "alfworld"
share = 0.5
teacher = "teacher"

[[sources]]
env = "search"
share = 0.25
teacher = "{search_teacher}"
max_turns = 4
[sources.depth]
max = 4

[[sources]]
env = "webshop"
share = 0.25
teacher = {shop_teacher}
[sources.blend]
min_floor = 1
"""


def multi_env_config(tmp_path: Path, shop_endpoint: tuple[str, str] | None = None) -> Path:
    """configs/smoke.toml with three sources; the search and shop teachers are copies of the zoo
    teacher under their own names, so each source has its own Serve app, or, for the shop, the
    server at ``shop_endpoint`` (its URL and served model name)."""
    teachers = {}
    for name in ("teacher-search", "teacher-shop"):
        teachers[name] = tmp_path / name
        shutil.copytree(zoo_cache_dir() / "models" / "teacher", teachers[name])
    config = smoke_config(tmp_path)
    text = config.read_text().replace("[optim]\nbatch = 4\nsteps = 3", "[optim]\nbatch = 8\nsteps = 4")
    text = text.replace("[eval]\ninterval = 3", "[eval]\ninterval = 4")
    # three teacher apps on the test cluster's 2 CPUs
    text = text.replace("[teacher]\nnum_cpus = 0.5", f"[teacher]\n{ENDPOINT_CLIENT}num_cpus = 0.25")
    shop = f'"{teachers["teacher-shop"]}"'
    if shop_endpoint:
        shop += f'\nendpoint_url = "{shop_endpoint[0]}"\nendpoint_model = "{shop_endpoint[1]}"'
    text += SOURCES.format(search_teacher=teachers["teacher-search"], shop_teacher=shop)
    config.write_text(text)
    return config


def test_one_student_learns_from_a_teacher_per_environment(ray_session, tmp_path):
    """Two teachers are Serve apps of the run; the shop's scores on a server of its own (our app
    served over HTTP from this process, as a user's vLLM would be) through [[sources]] alone."""
    shop_copy = tmp_path / "shop-server-teacher"
    shutil.copytree(zoo_cache_dir() / "models" / "teacher", shop_copy)
    server = LoopbackTeacher(shop_copy)
    server.start()
    failures = EndpointFailures().attach()
    try:
        check_a_run_with_a_teacher_per_environment(tmp_path, server, failures)
    finally:
        failures.detach()
        server.stop()


def check_a_run_with_a_teacher_per_environment(
    tmp_path: Path, server: LoopbackTeacher, failures: EndpointFailures
) -> None:
    config = multi_env_config(tmp_path, shop_endpoint=(server.url, server.backend.served_model))
    settings = load_settings(config)
    assert settings.teacher.client_max_attempts == 16
    assert [t.app for t in settings.for_teachers()] == ["teacher-teacher", "teacher-search", "teacher-shop"]
    assert [t.teacher.endpoint_url for t in settings.for_teachers()] == ["", "", server.url]
    scored_before = server.backend.metrics.exposition()
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    evals: list[EvalRecord] = []

    apps_mid_run: list[set[str]] = []
    outage: dict[str, float] = {}

    def down_then_up() -> None:
        server.stop()
        outage["stopped"] = time.monotonic()
        failures.first.wait(timeout=600)  # a step found it down: it stays down OUTAGE_S from there
        outage["found"] = time.monotonic()
        time.sleep(OUTAGE_S)
        server.start()
        outage["started"] = time.monotonic()

    restarter = threading.Thread(target=down_then_up, daemon=True)

    def on_step(m: StepMetrics) -> None:
        apps_mid_run.append(set(serve.status().applications))
        if m.step == 1:
            submit_restart("controller")  # every source's controller resumes from its own keys
            submit_restart("teacher-search")  # one teacher replaced mid-run while the others serve
        if m.step == 2:  # the shop's endpoint down from the start of step 3, before it is scored
            restarter.start()

    assert train(settings, run, on_step, evals.append) == 4
    restarter.join(timeout=60)

    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == [1, 2, 3, 4]
    for m in metrics:
        assert m.sources is not None and [s.env for s in m.sources] == ["alfworld", "search", "webshop"]
        assert [s.trajectories + s.failed_episodes for s in m.sources] == [4, 2, 2]  # the shares of 8
        search = m.sources[1]
        assert search.h_roll <= 4  # its own H_max
    decisions = read_jsonl(run.path("controller.jsonl"), StepDecision)
    assert [(d.step, d.env) for d in decisions] == [
        (k, e) for k in (1, 2, 3, 4) for e in ("alfworld", "search", "webshop")
    ]
    records = read_jsonl(run.path("turn_stats.jsonl"), TurnStatsRecord)
    assert {r.env for r in records} == {"alfworld", "search", "webshop"}
    # every step's statistics once per source (what the outage test checked of its single source)
    assert sorted((r.step, r.env) for r in records) == sorted(
        (k, e) for k in (1, 2, 3, 4) for e in ("alfworld", "search", "webshop")
    )
    for env in ("alfworld", "search", "webshop"):  # each controller equals its own replay
        assert_decisions_equal_replay(run.root, 4, settings.for_controller(env).depth, env=env)
    assert [(e.step, e.env, e.episodes) for e in evals] == [
        (4, "alfworld", 2),
        (4, "search", 2),
        (4, "webshop", 2),
    ]
    assert [e.env for e in read_jsonl(run.path("eval.jsonl"), EvalRecord)] == [
        "alfworld",
        "search",
        "webshop",
    ]
    # each env's own reward and task types (what test_train_envs checked of a search-only run)
    search_eval, shop_eval = evals[1], evals[2]
    assert search_eval.split == shop_eval.split == "valid_unseen"
    assert search_eval.per_task_type and set(search_eval.per_task_type) <= {
        "single_hop",
        "two_hop",
        "three_hop",
    }
    assert shop_eval.per_task_type and set(shop_eval.per_task_type) <= set(CATEGORIES)
    assert all(m.sources is not None and m.sources[1].failed_episodes == 0 for m in metrics)

    # the shop's server was down, step 3 found it so and waited the outage through: no step lost or
    # repeated (above), no episode lost, every weights version once
    assert outage["started"] - outage["found"] >= OUTAGE_S and outage["found"] >= outage["stopped"]
    assert failures.first.is_set() and failures.count >= 2
    assert all(m.failed_episodes == 0 and m.trajectories == settings.optim.batch for m in metrics)
    assert [m.weights_version for m in metrics] == [1, 2, 3, 4]
    assert metrics[2].times.teacher_s >= OUTAGE_S - 1.0  # the scoring that waited

    restarts = read_jsonl(run.path("restarts.jsonl"), RestartResult)
    assert [(r.service, r.ok) for r in restarts] == [("controller", True), ("teacher-search", True)]
    assert "teacher-search redeployed" in restarts[1].message
    # the shop's trajectories were scored on its server, and no Serve app was deployed for it
    # (at start-up it answered the K and tokenizer probes; then at least a request a step)
    assert answered(server.backend.metrics.exposition()) >= answered(scored_before) + 2 + 4
    assert all(m.sources is not None and m.sources[2].trajectories > 0 for m in metrics)
    assert all(
        {"teacher-teacher", "teacher-search"} <= apps and "teacher-shop" not in apps for apps in apps_mid_run
    )


def answered(exposition: bytes) -> float:
    """The scoring requests a teacher's /metrics says it answered."""
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            if sample.name == "turnopd_teacher_requests_total" and sample.labels["outcome"] == "ok":
                return sample.value
    return 0.0
