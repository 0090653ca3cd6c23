"""Room for more actors of a pool: what is missing, in Ray's resource names."""

import pytest

from services.cluster_capacity import actor_resource_options, check_free_resources, missing_resources
from services.errors import InputError

WORKER = {"CPU": 0.5, "rollout_pool": 1.0}


def test_what_is_missing_for_several_actors():
    assert missing_resources({"CPU": 4.0, "rollout_pool": 3.0}, WORKER, 3) == {}
    assert missing_resources({"CPU": 1.0, "rollout_pool": 3.0}, WORKER, 3) == {"CPU": 0.5}
    assert missing_resources({"CPU": 1.0}, WORKER, 2) == {"rollout_pool": 2.0}


def test_the_refusal_names_the_need_the_shortfall_and_what_is_free():
    check_free_resources({"CPU": 1.0, "rollout_pool": 2.0}, WORKER, 2, "rollout worker")  # fits
    with pytest.raises(InputError) as caught:
        check_free_resources({"CPU": 1.0, "rollout_pool": 1.0}, WORKER, 2, "rollout worker")
    assert str(caught.value) == (
        "2 more rollout worker(s) need CPU 0.5, rollout_pool 1 each; the cluster is short of "
        "rollout_pool 1 more (free now: CPU 1, rollout_pool 1); add nodes with these resources, or ask for fewer"
    )


def test_actor_options_take_cpus_and_gpus_apart_and_always_set_them():
    assert actor_resource_options({"CPU": 1.0, "GPU": 0.5, "rollout_pool": 1.0}) == {
        "num_cpus": 1.0,
        "num_gpus": 0.5,
        "resources": {"rollout_pool": 1.0},
    }
    assert actor_resource_options({}) == {"num_cpus": 0.0, "num_gpus": 0.0}  # not Ray's default CPU
