"""A one-worker CPU learner as one plain Ray actor: the same train loop, without Ray Train.

Ray Train starts, for every learner it starts, a controller actor, a placement-group cleaner and a
synchronisation actor beside the worker, each a process that imports Ray Train; its worker imports
it too (about 8 CPU-seconds a start on 2 cores, ``bench/startup_cost.py``). With one CPU worker
they coordinate nothing, so ``Learner`` runs ``train_loop`` in this actor instead, on a one-rank
gloo process group of its own, unless ``[learner] ray_train_for_one_worker`` asks for Ray Train.
More workers, or a GPU, always go through Ray Train.
"""

from typing import Any

import torch.distributed as dist

from services.learner.train_loop import train_loop


class SoloLearnerWorker:
    """The actor's body: ``run`` blocks until the loop takes a ``LearnerStop`` from its inbox."""

    def run(self, config: dict[str, Any]) -> None:
        # one rank: an in-process store, no port to agree on
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            train_loop(config)
        finally:
            dist.destroy_process_group()
