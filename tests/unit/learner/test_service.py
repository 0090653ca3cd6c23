"""The orchestrator's side of the learner without Ray Train: the ranks' typed answers merged into one step."""

import pickle

import numpy as np
import pytest

from services.contracts.arrays import PackedArray
from services.contracts.learner import (
    LearnerBatch,
    LearnerCheckpointed,
    LearnerRankResult,
    LearnerReady,
    LearnerSample,
    LearnerStepped,
)
from services.contracts.records import TrajectoryTurnStats
from services.learner.service import LearnerError, merged_step, shard_by_tokens


def sample(n_tokens: int) -> LearnerSample:
    return LearnerSample(
        token_ids=list(range(n_tokens)), positions=[1], turn_index=[0], token_weights=[1.0 / 3],
        sampler_logprobs=[-0.5], teacher_top_ids=PackedArray.pack(np.zeros((1, 2), dtype=np.int64)),
        teacher_top_logprobs=PackedArray.pack(np.zeros((1, 2), dtype=np.float32)), num_turns=1,
        success=n_tokens > 4, truncated=False,
    )  # fmt: skip


BATCH = LearnerBatch(step=5, probe=True, alpha=0.25, h_roll=6, samples=[sample(6), sample(3), sample(4)])


def stepped(rank: int, ids: list[int], loss: float, weights: object = None, step: int = 5) -> LearnerStepped:
    stats = [
        TrajectoryTurnStats(turn_tokens=[1], turn_kl_sum=[0.1 * i], success=True, truncated=False)
        for i in ids
    ]
    result = LearnerRankResult(
        step=step, rank=rank, sample_ids=ids, turn_stats=stats, weighted_loss=loss, kl_sum=0.5 * len(ids),
        tokens=len(ids), grad_norm=2.0 + rank, forward_backward_s=1.0 + rank, optimizer_s=0.5,
    )  # fmt: skip
    return LearnerStepped(result=result, weights=weights)


def test_ranks_answers_merge_in_batch_order_with_rank_0s_weights():
    assert shard_by_tokens([6, 3, 4], 2) == [[0], [1, 2]]
    answers = [stepped(1, [1, 2], 0.25), stepped(0, [0], 0.5, weights="ref-of-step-5")]  # any arrival order
    result, weights = merged_step(BATCH, answers)
    assert weights == "ref-of-step-5"
    assert (result.step, result.weights_version, result.tokens) == (5, 5, 3)
    assert result.loss == pytest.approx(0.75) and result.mean_kl == pytest.approx(0.5)
    assert (result.grad_norm, result.forward_backward_s) == (2.0, 2.0)  # rank 0's norm, the slowest rank
    assert [t.turn_kl_sum for t in result.turn_stats.trajectories] == [[0.0], [0.1], [0.2]]
    assert (result.turn_stats.probe, result.turn_stats.alpha, result.turn_stats.h_roll) == (True, 0.25, 6)


def test_an_answer_that_is_not_this_steps_is_an_error():
    with pytest.raises(LearnerError, match="unexpected learner message during step 5: LearnerCheckpointed"):
        merged_step(BATCH, [stepped(0, [0, 1, 2], 0.5, "ref"), LearnerCheckpointed(rank=1, step=5)])
    with pytest.raises(LearnerError, match="unexpected learner message during step 5: LearnerReady"):
        merged_step(BATCH, [LearnerReady(rank=0, world_size=1, resumed_step=0, threads=1)])
    with pytest.raises(LearnerError, match="during step 5: LearnerStepped"):
        merged_step(BATCH, [stepped(0, [0, 1, 2], 0.5, "ref", step=4)])
    with pytest.raises(LearnerError, match="no rank 0 weights"):
        merged_step(BATCH, [stepped(0, [0, 1, 2], 0.5)])


def test_stepped_crosses_the_queue_with_its_weights_handle():
    message = stepped(0, [0], 0.5, weights={"w": 1})
    assert pickle.loads(pickle.dumps(message)) == message


def test_the_trainer_keeps_every_ray_train_callback_but_the_datasets_one():
    """The learner reads no Ray Dataset: Ray Train's datasets callback (a DatasetManager actor per
    fit) is left out, every other callback of Ray's own TorchTrainer kept, in order. No Ray needed."""
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer

    from services.learner.service import LearnerTrainer

    def names(trainer) -> list[str]:  # type: ignore[no-untyped-def]
        return [type(c).__name__ for c in trainer._create_default_callbacks()]

    scaling = ScalingConfig(num_workers=1)
    ray_own = names(TorchTrainer(lambda config: None, scaling_config=scaling))
    ours = names(LearnerTrainer(lambda config: None, scaling_config=scaling))
    assert "DatasetsCallback" in ray_own and "BackendSetupCallback" in ray_own
    assert ours == [name for name in ray_own if name != "DatasetsCallback"]


def learner_settings(workers: int = 1, gpus: int = 0, ray_train: bool = False, pools: bool = False):
    from services.settings import TurnOPDSettings

    s = TurnOPDSettings()
    s.cluster.learner_workers = workers
    s.cluster.pool_resources = pools
    s.cluster.learner_gpus_per_worker = gpus
    s.learner.num_cpus_per_worker = 0.5
    s.learner.ray_train_for_one_worker = ray_train
    return s.for_learner()


def test_only_one_cpu_worker_runs_as_a_plain_actor_unless_ray_train_is_asked_for():
    from services.learner.service import runs_solo

    assert runs_solo(learner_settings())
    assert not runs_solo(learner_settings(workers=2))
    assert not runs_solo(learner_settings(gpus=1))
    assert not runs_solo(learner_settings(ray_train=True))


def test_the_plain_actor_reserves_what_a_ray_train_worker_would_and_is_never_restarted():
    from services.learner.service import solo_worker_options

    assert solo_worker_options(learner_settings()) == {"num_cpus": 0.5, "num_gpus": 0.0, "max_restarts": 0}
    assert solo_worker_options(learner_settings(pools=True)) == {
        "num_cpus": 0.5, "num_gpus": 0.0, "resources": {"learner_pool": 1.0}, "max_restarts": 0
    }  # fmt: skip


def test_ray_train_workers_reserve_the_same_resources_plus_their_gpus():
    from services.learner.service import worker_resources

    assert worker_resources(learner_settings(workers=2)) == {"CPU": 0.5}
    assert worker_resources(learner_settings(workers=2, gpus=1, pools=True)) == {
        "CPU": 0.5, "GPU": 1.0, "learner_pool": 1.0
    }  # fmt: skip
