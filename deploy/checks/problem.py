"""One finding of a check, printed as ``where: resource: path: message``."""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """A validation failure: the file or overlay, the resource in it, the field path, what is wrong."""

    where: str
    resource: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.resource}: {self.path or '<root>'}: {self.message}"


def field_path(parts: Iterable[str | int]) -> str:
    """Render a path of keys and list indices as ``spec.workerGroupSpecs[0].replicas``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
