"""The worker's body without Ray: version checks, weight loading, Ray options."""

import pickle
from pathlib import Path

import pytest

from services.contracts.rollout import EpisodeTask, RolloutRequest
from services.errors import ConflictError
from services.models.loading import load_causal_lm
from services.rollout_worker.actor import RolloutWorkerService, worker_options
from services.rollout_worker.weights_version import StaleWeightsError
from services.settings import load_settings

REQUEST = RolloutRequest(
    tasks=[EpisodeTask(env="alfworld", split="train", seed=0)], h_roll=2, temperature=1.0, weights_version=1
)


def test_worker_refuses_other_versions_and_loads_published_weights(zoo_cache: Path):
    settings = load_settings(None, {"models": {"cache_dir": zoo_cache}})
    service = RolloutWorkerService(settings.for_rollout_worker(), 3, "http://127.0.0.1:9", model="student")
    assert service.name == "rollout-worker-3" and service.weights_version() == 0
    with pytest.raises(
        StaleWeightsError, match="rollout-worker-3 holds weights version 0 but the request is for"
    ):
        service.play(REQUEST)
    weights = load_causal_lm("student", cache_dir=zoo_cache).state_dict()
    weights.pop("lm_head.weight")  # tied: the learner leaves it out
    assert service.load_weights(weights, 1) == 0  # the version held before
    assert service.weights_version() == 1
    with pytest.raises(ConflictError, match="must increase"):
        service.load_weights(weights, 1)
    assert service.load_weights(weights, 2) == 1
    # a run that went back to a checkpoint (its learner lost) publishes an older version, as a rewind
    with pytest.raises(ConflictError, match="must increase: now 2, got 1"):
        service.load_weights(weights, 1)
    assert service.load_weights(weights, 1, rewind=True) == 2 and service.weights_version() == 1
    assert service.load_weights(weights, 0, rewind=True) == 1 and service.weights_version() == 0
    with pytest.raises(ConflictError, match="must be >= 0, got -1"):
        service.load_weights(weights, -1, rewind=True)


def test_stale_weights_error_survives_pickling_as_ray_moves_it():
    error = pickle.loads(pickle.dumps(StaleWeightsError("rollout-worker-0", 2, 1)))
    assert isinstance(error, ConflictError) and (error.held, error.requested) == (2, 1)
    assert "version 2" in str(error)


def test_ray_options_name_the_worker_and_ask_for_the_pool_resource_on_pooled_clusters():
    settings = load_settings(None, {"cluster": {"rollout_gpus_per_worker": 1, "pool_resources": True}})
    options = worker_options(settings.for_rollout_worker(), 2)
    assert options["name"] == "rollout-worker-2" and options["namespace"] == "turnopd"
    assert options["num_gpus"] == 1 and options["resources"] == {"rollout_pool": 1}
    assert options["max_restarts"] == -1
    assert "resources" not in worker_options(load_settings(None).for_rollout_worker(), 0)
