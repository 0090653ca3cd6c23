"""Training methods as switches over one pipeline (no forks): what each method does with depth and alpha.

* ``turnopd``: adaptive depth + linear trajectory->turn blend (the paper's method).
* ``vanilla``: full depth every step, trajectory-level loss (alpha = 0).
* ``adaptive-depth``: adaptive depth, alpha = 0.
* ``blend``: full depth, linear blend.
* ``turn-norm``: full depth, hard turn-level normalisation (alpha = 1).
* ``tcod``: TCOD-style front-to-back length curriculum: the depth cap grows linearly from H_min
  to ``max_turns`` over the run, alpha = 0.

Methods without adaptive depth still run the depth controller in shadow on its probe schedule
(every batch is then uncensored), so their logs show what TurnOPD would have chosen.
"""

import math
from dataclasses import dataclass
from typing import Literal

from services.contracts.method import Method

AlphaMode = Literal["zero", "linear", "one"]
DepthMode = Literal["adaptive", "full", "curriculum"]


@dataclass(frozen=True)
class MethodSwitches:
    depth: DepthMode
    alpha: AlphaMode


def switches(method: Method) -> MethodSwitches:
    """The depth and alpha behaviour of a method."""
    match method:
        case "turnopd":
            return MethodSwitches(depth="adaptive", alpha="linear")
        case "vanilla":
            return MethodSwitches(depth="full", alpha="zero")
        case "adaptive-depth":
            return MethodSwitches(depth="adaptive", alpha="zero")
        case "blend":
            return MethodSwitches(depth="full", alpha="linear")
        case "turn-norm":
            return MethodSwitches(depth="full", alpha="one")
        case "tcod":
            return MethodSwitches(depth="curriculum", alpha="zero")
        case _:
            raise ValueError(f"unknown method {method!r}")


def curriculum_depth(step: int, total_steps: int, h_min: int, max_turns: int) -> int:
    """Front-to-back curriculum: H_min + ceil((max_turns - H_min) * k / K), capped at max_turns."""
    return min(max_turns, h_min + math.ceil((max_turns - h_min) * step / total_steps))
