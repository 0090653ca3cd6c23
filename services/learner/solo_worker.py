"""A one-worker CPU learner as one plain Ray actor: the same train loop, without Ray Train.

Ray Train starts, for every learner it starts, a controller actor, a placement-group cleaner and a
synchronisation actor beside the worker, each a process that imports Ray Train; its worker imports
it too (about 8 CPU-seconds a start on 2 cores, ``bench/startup_cost.py``). With one CPU worker
they coordinate nothing, so ``Learner`` runs the train loop in this actor instead, on a one-rank
gloo process group of its own, unless ``[learner] ray_train_for_one_worker`` asks for Ray Train.
More workers, or a GPU, always go through Ray Train.
"""

import torch.distributed as dist

from services.learner.train_loop import LoopArgs, run_train_loop


class SoloLearnerWorker:
    """The actor's body: ``run`` blocks until the loop takes a ``LearnerStop`` from its inbox."""

    def run(self, args: LoopArgs) -> None:
        # one rank: an in-process store, no port to agree on
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            run_train_loop(args)
        finally:
            dist.destroy_process_group()
