"""Scale-out on several Ray nodes of this machine (``tests/local_cluster.py``): `turnopd train` with
``[cluster] pool_resources = true`` on a head with no pool resources, two serving nodes
(``rollout_pool``, ``teacher_pool``) and a learner node (``learner_pool``), as the KubeRay
manifests lay a cluster out.

Where every actor ran is read from Ray's state API (what Ray recorded, not what the actors say).
One run loses two machines. In step 3 a serving node that hosts a rollout worker and a teacher
replica is killed with no grace: the run goes on with what is left, losing and repeating nothing.
In step 5 the learner's node is lost: the run ends with an error that says to resume, and
``--resume`` on new nodes finishes it, every step once, the controller equal to a replay of its
probes.
"""

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_replay import assert_decisions_equal_replay
from local_cluster import LocalCluster
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
STEPS = 6
SERVING = {"rollout_pool": 1.0, "teacher_pool": 1.0}
LEARNER = {"learner_pool": 1.0}
NODES = [
    {"num_cpus": 2, "resources": SERVING},
    {"num_cpus": 2, "resources": SERVING},
    {"num_cpus": 1, "resources": LEARNER},
]
OVERRIDES = short_run(
    STEPS,
    "rollout_workers = 2\nteacher_replicas = 2\npool_resources = true",
    "restart_timeout_s = 8.0",  # the lost node's worker cannot come back: no node has its resource
    checkpoint_every=1,
)
# Ray's class names of the actors of each pool; those of no pool live on the driver's node (the head)
POOL_OF = {
    "RolloutWorker": "rollout_pool",
    "ServeReplica:teacher:TeacherScorer": "teacher_pool",
    "SoloLearnerWorker": "learner_pool",
}
ON_DRIVER_NODE = ("ControllerActor", "RunControlActor", "Mailbox")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with LocalCluster(NODES, tmp_path_factory.mktemp("cluster") / "keeper.log") as local:
        yield local


def start_train(cluster: LocalCluster, log: Path, *args: str) -> subprocess.Popen[str]:
    """`turnopd train ARGS` joined to ``cluster``, its output in ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "train", *args],
        cwd=REPO,
        env=cluster.env(),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_step(run_dir: Path, step: int, train: subprocess.Popen[str], log: Path) -> None:
    """Until ``metrics.jsonl`` has ``step`` (the run failing first fails the test with its log)."""
    deadline = time.monotonic() + 600
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= step:
            return
        if train.poll() is not None:
            pytest.fail(
                f"the run ended (exit {train.returncode}) before step {step}:\n{log.read_text()[-4000:]}"
            )
        time.sleep(0.5)
    pytest.fail(f"no step {step} within 600 s")


def check_placement(cluster: LocalCluster, counts: dict[str, int]) -> dict[str, set[str]]:
    """Every live actor of a pool on a node with that pool's resource, those of no pool on the head,
    and ``counts`` of each; returns, for each pool and for each actor's name, the nodes (indices).

    The counts are read until they match, for up to 30 s: the state API lists an actor of an earlier
    run (or of a node lost in the test before) as ALIVE until the GCS has marked it dead. A mismatch
    after that fails with every live actor named."""
    deadline = time.monotonic() + 30
    while True:
        alive = [a for a in cluster.actors() if a["state"] == "ALIVE"]
        seen = {name: sum(a["class_name"] == name for a in alive) for name in counts}
        if seen == counts or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    listed = "\n".join(f"  {a['class_name']} {a['name']!r} on node {a['node_id']}" for a in alive)
    assert seen == counts, f"live actors {seen}, expected {counts}:\n{listed}"
    resources = {node: {} for node in cluster.nodes}
    for index, spec in enumerate(NODES, start=1):
        resources[cluster.nodes[index]] = spec["resources"]
    head = cluster.nodes[0]
    where: dict[str, set[str]] = {}
    for actor in alive:
        name, node = actor["class_name"], actor["node_id"]
        pool = POOL_OF.get(name)
        if pool is not None:
            assert pool in resources[node], f"{name} ({actor['name']}) on a node without {pool}"
            where.setdefault(pool, set()).add(str(cluster.nodes.index(node)))
            where.setdefault(actor["name"], set()).add(str(cluster.nodes.index(node)))
        elif name in ON_DRIVER_NODE:
            assert node == head, f"{name} ({actor['name']}) is not on the driver's node"
    return where


def expected_actors(rollout_workers: int, teacher_replicas: int) -> dict[str, int]:
    return {
        "RolloutWorker": rollout_workers,
        "ServeReplica:teacher:TeacherScorer": teacher_replicas,
        "SoloLearnerWorker": 1,  # one CPU learner worker: a plain actor (services/learner/solo_worker.py)
        "RayTrainWorker": 0,
        "ControllerActor": 1,
        "RunControlActor": 1,
        "Mailbox": 1,  # the learner's inboxes and outbox, one actor
        "TrainController": 0,  # no Ray Train actor at all
    }


def check_every_step_once(config: Path) -> None:
    """Steps 1..STEPS once each, every episode played, and the controller equal to a replay."""
    settings = load_settings(config)
    run_dir = Path(settings.run.run_dir)
    metrics = read_jsonl(run_dir / "metrics.jsonl", StepMetrics)
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 and m.trajectories == settings.optim.batch for m in metrics)
    assert_decisions_equal_replay(run_dir, STEPS, settings.depth)


def test_a_serving_node_then_the_learner_node_lost_and_resume_finishes_the_run(cluster, tmp_path):
    config = tmp_path / "multi_node.toml"
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), OVERRIDES))
    log = tmp_path / "train.log"
    train = start_train(cluster, log, "--config", str(config))
    try:
        wait_for_step(tmp_path / "run", 2, train, log)
        where = check_placement(cluster, expected_actors(2, 2))
        [learner_node] = where["learner_pool"]
        assert learner_node == "3"
        # the node to lose: one that hosts a rollout worker and a teacher replica (both do, one each)
        victim = sorted(where["rollout_pool"] & where["teacher_pool"])[0]
        [lost] = [w for w in ("rollout-worker-0", "rollout-worker-1") if where[w] == {victim}]
        time.sleep(1.0)  # into step 3's rollout
        cluster.kill(int(victim))
        wait_for_step(tmp_path / "run", 4, train, log)  # the run went on without that machine
        time.sleep(1.0)  # into step 5
        cluster.kill(int(learner_node))
        code = train.wait(timeout=600)
    finally:
        if train.poll() is None:
            train.kill()
    text = log.read_text()
    # its rollout worker could not come back (no other node has a free rollout_pool): its chunk was
    # played again by the other worker, and the pool went on with one
    assert f"{lost} did not come back; the pool goes on without it" in text
    assert code != 0, text[-4000:]
    done = len(read_jsonl(tmp_path / "run" / "metrics.jsonl", StepMetrics))
    assert 4 <= done < STEPS
    assert "error: learner workers failed (a rank raised, or its process or node was lost)" in text
    # checkpoint_every = 1: the hint names the last step done (or the one before, if the node went
    # between that step's log line and its checkpoint)
    hint = f"with: turnopd train --resume {tmp_path / 'run'}"
    assert f"hint: the run goes on from its checkpoint of step {done} {hint}" in text or (
        f"hint: the run goes on from its checkpoint of step {done - 1} {hint}" in text
    ), text[-4000:]

    # both machines replaced: the resumed run has its two rollout workers and teacher replicas again
    cluster.add(2, SERVING)
    cluster.add(1, LEARNER)
    log = tmp_path / "resume.log"
    resumed = start_train(cluster, log, "--resume", str(tmp_path / "run"))
    try:
        assert resumed.wait(timeout=900) == 0, log.read_text()[-4000:]
    finally:
        if resumed.poll() is None:
            resumed.kill()
    check_every_step_once(config)
