"""The system arms of the frontier (issue 63 item 3, ``bench/frontier.py --system``): TurnOPD and
vanilla OPD with everything this system adds to a step, against the paper's synchronous step.

The system arm is the demo's step: the rollouts of step k+1 play while the learner trains step k
(``[pipeline] max_staleness = 1``, so each step's rollouts lag its weights by one version at most),
and the teacher scores each finished rollout chunk while the step's other chunks still play
(``stream_teacher``). A pipelined vanilla arm beside it separates the gain of the pipeline from the
gain of the method: vanilla / vanilla-pipelined is the pipeline's, vanilla-pipelined /
turnopd-system the method's on the pipelined step.
"""

import dataclasses
from collections.abc import Sequence

from services.experiments.protocols import RunLogs

SYSTEM_DIR = "system"  # OUT/system/<method>/seed<s>, RECORDS/system/<method>/seed<s>
SYSTEM_OVERRIDES = {"pipeline": {"max_staleness": 1, "stream_teacher": True}}
SYSTEM_LABELS = {"turnopd": "turnopd-system", "vanilla": "vanilla-pipelined"}


def as_system_arms(runs: Sequence[RunLogs]) -> list[RunLogs]:
    """The system runs under their arms' names (the runs' own method is TurnOPD's or vanilla's)."""
    return [dataclasses.replace(r, method=SYSTEM_LABELS[r.method]) for r in runs]
