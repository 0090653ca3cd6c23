"""What `turnopd compare` will run: one settings object per (method, seed), and what each run dir holds.

Every run gets the same config with ``run.method``, ``run.seed``, ``run.run_dir``
(``DIR/<method>/seed<s>``), ``run.run_id`` (``<DIR name>-<method>-seed<s>``, so runs sharing one
Redis never share keys), with ``--steps``, ``optim.steps`` overridden, and any further overrides a
benchmark's arm sets (``bench/frontier.py --system``: the pipelined step). An existing run is reused
(complete) or resumed (partial) only if its saved config equals the one it would be started with.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from services.contracts.method import Method
from services.errors import InputError
from services.experiments.compare_dir import RunState, run_path
from services.experiments.run_start import checked_state
from services.settings import TurnOPDSettings, load_settings


@dataclass(frozen=True)
class PlannedRun:
    method: Method
    seed: int
    path: Path
    settings: TurnOPDSettings
    state: RunState


def parse_methods(text: str) -> list[Method]:
    """``turnopd,vanilla`` -> methods, in order; unknown or repeated names are an error."""
    known: tuple[Method, ...] = get_args(Method)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InputError("--methods names no method")
    methods: list[Method] = []
    for name in names:
        match = next((m for m in known if m == name), None)
        if match is None:
            raise InputError(f"unknown method {name!r}; choose from {', '.join(known)}")
        if match in methods:
            raise InputError(f"method {name!r} is listed twice")
        methods.append(match)
    return methods


def run_settings(
    config: Path | None,
    method: Method,
    seed: int,
    steps: int | None,
    out: Path,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> TurnOPDSettings:
    """The settings of one run of the comparison (``overrides``: further sections' keys, set over
    the config's; not ``run``)."""
    if overrides and "run" in overrides:
        raise InputError("a comparison's overrides may not set [run]: each run's is the plan's")
    path = run_path(out.resolve(), method, seed)
    run = {
        "method": method,
        "seed": seed,
        "run_dir": path,
        "run_id": f"{out.resolve().name}-{method}-seed{seed}",
    }
    sections: dict[str, dict[str, Any]] = {name: dict(keys) for name, keys in (overrides or {}).items()}
    if steps is not None:
        sections["optim"] = {**sections.get("optim", {}), "steps": steps}
    return load_settings(config, {"run": run, **sections})


def plan_runs(
    config: Path | None,
    methods: Sequence[Method],
    n_seeds: int,
    steps: int | None,
    out: Path,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[PlannedRun]:
    """Every run of the comparison, method-major; seeds are ``run.seed`` of the config + 0..n_seeds-1."""
    if n_seeds < 1:
        raise InputError(f"--seeds must be >= 1, got {n_seeds}")
    base_seed = load_settings(config).run.seed
    planned = []
    for method in methods:
        for seed in range(base_seed, base_seed + n_seeds):
            settings = run_settings(config, method, seed, steps, out, overrides)
            path = settings.run.run_dir
            state = checked_state(settings, "use another --out or the config it was started with")
            planned.append(PlannedRun(method, seed, path, settings, state))
    return planned
