"""Read and write JSON-lines files of contracts; every problem names the file, line and key."""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from services.errors import InputError

M = TypeVar("M", bound=BaseModel)


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<line>"
        msg = (
            "unknown key"
            if err["type"] == "extra_forbidden"
            else str(err["msg"]).removeprefix("Value error, ")
        )
        parts.append(f"{key}: {msg}")
    return "; ".join(parts)


def read_jsonl(path: Path, model: type[M]) -> list[M]:
    """Parse every non-blank line of ``path`` as ``model``; raise InputError naming file:line on failure."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"expected a file, got a directory: {path}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None
    records: list[M] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line, parse_constant=_reject_constant)
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object, got {type(raw).__name__}")
        try:
            records.append(model.model_validate(raw))
        except ValidationError as exc:
            raise InputError(f"{path}:{lineno}: {_describe(exc)}") from None
    if not records:
        raise InputError(f"{path} has no records")
    return records


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> None:
    """Write one compact JSON object per line."""
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(record.model_dump_json() + "\n")
