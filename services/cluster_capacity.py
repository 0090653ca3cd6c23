"""An actor's resources in Ray's names, as Ray's options take them, and whether the cluster has
them free for more actors of a pool, said before asking Ray (which would otherwise leave the new
actors pending without a word). Pure: the caller passes ``ray.available_resources()``."""

from collections.abc import Mapping
from typing import Any

from services.errors import InputError


def actor_resource_options(needs: Mapping[str, float]) -> dict[str, Any]:
    """Ray's actor options for ``needs`` (``CPU``, ``GPU`` and custom resources, one dict): CPUs and
    GPUs apart, always set (0 is not Ray's default of one CPU), the rest under ``resources``."""
    options: dict[str, Any] = {"num_cpus": needs.get("CPU", 0.0), "num_gpus": needs.get("GPU", 0.0)}
    custom = {name: amount for name, amount in needs.items() if name not in ("CPU", "GPU")}
    if custom:
        options["resources"] = custom
    return options


def missing_resources(
    free: Mapping[str, float], per_actor: Mapping[str, float], count: int
) -> dict[str, float]:
    """How much of each resource ``count`` actors of ``per_actor`` need beyond what is ``free``."""
    short = {name: count * amount - free.get(name, 0.0) for name, amount in per_actor.items()}
    return {name: amount for name, amount in short.items() if amount > 1e-9}


def check_free_resources(
    free: Mapping[str, float], per_actor: Mapping[str, float], count: int, what: str
) -> None:
    """InputError naming what is missing when ``count`` more ``what``s do not fit in ``free``."""
    short = missing_resources(free, per_actor, count)
    if short:
        needs = ", ".join(f"{name} {amount:g}" for name, amount in sorted(per_actor.items()))
        lacking = ", ".join(f"{name} {amount:g} more" for name, amount in sorted(short.items()))
        has = ", ".join(f"{name} {free.get(name, 0.0):g}" for name in sorted(per_actor))
        raise InputError(
            f"{count} more {what}(s) need {needs} each; the cluster is short of {lacking} "
            f"(free now: {has}); add nodes with these resources, or ask for fewer"
        )
