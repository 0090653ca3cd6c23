"""What the stack asks a local Ray for: every actor's logical CPUs, a teacher app per teacher."""

from services.operations.stack import logical_cpus_needed
from services.settings import load_settings


def test_a_local_cluster_is_sized_for_every_teacher_app():
    base = {
        "cluster": {"rollout_workers": 2},
        "rollout_worker": {"num_cpus": 0.5},
        "teacher": {"num_cpus": 0.25},
    }
    assert logical_cpus_needed(load_settings(None, base)) == 2 * 0.5 + 0.25 + 1.0  # learner: 1 CPU by default
    sources = [
        {"env": "alfworld", "share": 0.5, "teacher": "teacher-novel"},
        {"env": "search", "share": 0.25, "teacher": "teacher-search"},
        {"env": "webshop", "share": 0.25, "teacher": "teacher-novel"},  # shares the household teacher's app
    ]
    assert logical_cpus_needed(load_settings(None, {**base, "sources": sources})) == 2 * 0.5 + 2 * 0.25 + 1.0


def test_an_endpoint_teacher_reserves_no_cpus_here():
    settings = {"cluster": {"rollout_workers": 2}, "rollout_worker": {"num_cpus": 0.5}}
    endpoint = {"teacher": {"num_cpus": 0.25, "endpoint_url": "http://vllm:8000"}}
    assert logical_cpus_needed(load_settings(None, {**settings, **endpoint})) == 2 * 0.5 + 1.0
