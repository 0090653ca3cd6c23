"""The training methods a run may use (``[run] method``): full TurnOPD and its five baselines."""

from typing import Literal

Method = Literal["turnopd", "vanilla", "adaptive-depth", "blend", "turn-norm", "tcod"]
