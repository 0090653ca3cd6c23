"""The FSDP2 learner: 2 workers on Ray Train and 1 worker as one plain actor (``solo_worker``) agree,
update for update with 3 mini-batches a step, and a checkpoint resumes exactly on 1 worker under Ray
Train (``[learner] ray_train_for_one_worker``). Each rank's loop runs on the torch threads it is given
(``[learner] threads_per_worker``), under Ray Train too. (The default single update per step is the case every
end-to-end run trains with.)"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import ray
import torch
from learner_batches import make_batch

from services.learner.checkpoint import latest_checkpoint, read_state
from services.learner.service import Learner
from services.settings import TurnOPDSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def settings_for(workers: int) -> TurnOPDSettings:
    s = TurnOPDSettings()
    s.cluster.learner_workers = workers
    s.learner.num_cpus_per_worker = 0.5  # two learners (three workers) side by side on 2 CPUs
    s.learner.checkpoint_every = 2
    s.learner.token_budget = 64
    s.optim.lr = 1e-3
    s.run.run_id = "learner-test"
    return s


def start_side_by_side(*starts: tuple[TurnOPDSettings, Path, Path]) -> list[Learner]:
    """A ``Learner`` for each (settings, run dir, model), started at once (each start is mostly a
    new process importing torch: one after the other they left a core idle)."""
    with ThreadPoolExecutor(len(starts)) as threads:
        futures = [threads.submit(Learner, s.for_learner(), run, model) for s, run, model in starts]
    learners = [f.result() for f in futures if f.exception() is None]
    if len(learners) < len(futures):
        for learner in learners:
            learner.close()
        raise next(f.exception() for f in futures if f.exception() is not None)  # type: ignore[misc]
    return learners


def run_steps(learner, teacher, steps):
    out = []
    for k in steps:
        result, ref = learner.step(make_batch(teacher, step=k))
        out.append((result, ray.get(ref)))
    return out


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)


def test_two_workers_equal_one_and_resume_is_exact(ray_session, tmp_path, tiny_student, tiny_teacher):
    settings = {workers: settings_for(workers) for workers in (1, 2)}
    for each in settings.values():
        each.optim.mini_batches = 3  # three updates a step, each one checked across worker counts
    settings[1].learner.threads_per_worker = 2  # the plain actor's loop, and Ray Train's below
    two, one = start_side_by_side(
        (settings[2], tmp_path / "two", tiny_student), (settings[1], tmp_path / "one", tiny_student)
    )
    try:
        assert two.resumed_step == 0 and one.resumed_step == 0
        assert (two.solo, one.solo) == (False, True)  # Ray Train, and the plain actor
        assert (two.threads, one.threads) == ([1, 1], [2])  # 0.5 CPUs: Ray's 1, unless set
        res2 = run_steps(two, tiny_teacher, [1, 2])
        res1 = run_steps(one, tiny_teacher, [1, 2, 3])
    finally:
        two.close()
        one.close()
    ckpt = latest_checkpoint(tmp_path / "two")
    assert ckpt is not None and read_state(ckpt)["step"] == 2
    assert (ckpt / "config.json").is_file() and (ckpt / "model.safetensors").is_file()
    single = latest_checkpoint(tmp_path / "one")
    assert single is not None
    optimizer = torch.load(single / "optimizer.pt", weights_only=False)
    steps_saved = read_state(single)["step"]
    assert {float(s["step"]) for s in optimizer["state"].values()} == {3.0 * steps_saved}  # 3 a step

    for (r2, w2), (r1, w1) in zip(res2, res1[:2], strict=True):
        assert r2.loss == pytest.approx(r1.loss, rel=1e-4)
        assert r2.tokens == r1.tokens and r2.weights_version == r1.weights_version
        assert r2.turn_stats == r2.turn_stats.model_validate(r2.turn_stats.model_dump())
        assert [t.turn_tokens for t in r2.turn_stats.trajectories] == [
            t.turn_tokens for t in r1.turn_stats.trajectories
        ]
        assert_same_weights(w2, w1)
    assert res1[1][0].loss < res1[0][0].loss * 10  # a sane, finite second step

    settings[1].learner.ray_train_for_one_worker = True
    resumed = Learner(settings[1].for_learner(), tmp_path / "two", tiny_student)
    try:
        assert resumed.resumed_step == 2 and not resumed.solo  # after the last checkpoint, nothing replayed
        assert resumed.threads == [2]  # set in Ray Train's loop thread, not where the worker started
        ((r3, w3),) = run_steps(resumed, tiny_teacher, [3])
    finally:
        resumed.close()
    assert r3.loss == pytest.approx(res1[2][0].loss, rel=1e-4)
    assert_same_weights(w3, res1[2][1])

    from transformers import AutoModelForCausalLM

    reloaded = AutoModelForCausalLM.from_pretrained(ckpt)  # checkpoints are HF-loadable
    assert_same_weights({k: v for k, v in reloaded.state_dict().items() if k in res2[1][1]}, res2[1][1])
