"""Comparing saved settings dumps (plain JSON dicts) with the settings a command would use now.

`turnopd compare` checks a run directory's ``config.json`` against the config it would start the
run with; `turnopd teacher train` checks a saved partial run's keys against its ``[sft]`` settings.
Both name the differing keys, dotted, in the error.
"""

from collections.abc import Collection, Mapping
from typing import Any


def settings_differences(
    saved: Mapping[str, Any], wanted: Mapping[str, Any], ignored: Collection[str] = (), prefix: str = ""
) -> list[str]:
    """Dotted keys whose values differ between two nested settings dicts (``ignored`` left out)."""
    out: list[str] = []
    for key in sorted(set(saved) | set(wanted)):
        dotted = f"{prefix}{key}"
        a, b = saved.get(key), wanted.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.extend(settings_differences(a, b, ignored, dotted + "."))
        elif a != b and dotted not in ignored:
            out.append(dotted)
    return out


def with_defaults(saved: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``saved`` with every key it lacks taken from ``defaults`` (nested): a settings key added since
    a run was started counts as its default, so older runs stay comparable."""
    out = dict(saved)
    for key, default in defaults.items():
        if key not in out:
            out[key] = default
        elif isinstance(out[key], Mapping) and isinstance(default, Mapping):
            out[key] = with_defaults(out[key], default)
    return out
