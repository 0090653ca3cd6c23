"""Per-pool sizing of the cluster: how many workers each pool runs and the accelerators each gets.

The KubeRay manifests and `ray up` configs in k8s/ and deploy/ request exactly these numbers
(tests/unit/deploy checks it). On a cluster whose worker groups advertise the custom resources
``learner_pool``, ``rollout_pool``, ``teacher_pool`` and ``env_pool``, set ``pool_resources`` so
every actor asks for its pool's resource and lands on its own group.
"""

from pydantic import Field

from services.settings_section import Section


class ClusterSettings(Section):
    learner_workers: int = Field(1, ge=1, description="Ray Train workers (FSDP2 ranks) of the learner.")
    learner_gpus_per_worker: int = Field(0, ge=0, description="GPUs per learner worker (0: CPU + gloo).")
    rollout_workers: int = Field(2, ge=1, description="Rollout worker actors (rollout-worker-{i}).")
    rollout_gpus_per_worker: int = Field(0, ge=0, description="GPUs per rollout worker.")
    teacher_replicas: int = Field(1, ge=1, description="Teacher scorer Serve replicas (initial).")
    teacher_gpus_per_replica: int = Field(0, ge=0, description="GPUs per teacher replica.")
    env_replicas: int = Field(1, ge=1, description="Env gateway Serve replicas.")
    pool_resources: bool = Field(False, description="Ask for the <pool>_pool custom resource on every actor.")
