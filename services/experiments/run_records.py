"""A comparison's complete runs kept as small records, and brought back into a comparison directory.

A record is what the analysis of a complete run reads (config.json, metrics.jsonl, eval.jsonl) and
the controller's decisions, without checkpoints, models or logs: a few tens of KB a run. Kept under
``RECORDS/<method>/seed<s>/`` (the comparison directory's own layout), they let a benchmark whose
runs take hours each be spread over machines that do not share a disk: runs done on one are
recorded, and on the next a complete run found in the records is not trained again.

A record is never replaced or merged into: one already there for a run must be that very run (the
same settings and logs), or saving stops and names what differs; a new record is written into a
folder beside its place and moved there whole, so none is ever half written.
"""

import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from services.errors import ConflictError, InputError, TurnOPDError
from services.experiments.compare_dir import run_path, run_state, write_atomic
from services.experiments.compare_plan import PlannedRun
from services.experiments.run_start import differences_from_plan
from services.run_dir import CONFIG_FILE, DECISIONS_FILE, EVAL_FILE, METRICS_FILE

LOG_FILES = (METRICS_FILE, EVAL_FILE, DECISIONS_FILE)
RECORD_FILES = (CONFIG_FILE, *LOG_FILES)


def save_records(planned: Sequence[PlannedRun], records: Path) -> list[PlannedRun]:
    """Copy the record of every complete planned run into ``records``; the runs recorded (those
    already there included). Every record already there is checked before anything is written."""
    _check_records_dir(records)
    complete = [r for r in planned if run_state(r.path, r.settings.optim.steps) == "complete"]
    new = []
    for run in complete:
        target = run_path(records, run.method, run.seed)
        if target.exists():
            _check_same_run(target, run)
        else:
            new.append((run, target))
    for run, target in new:
        partial = target.with_name(f".{target.name}.partial")
        try:
            shutil.rmtree(partial, ignore_errors=True)  # left by a save that was interrupted
            partial.mkdir(parents=True)
            for name in RECORD_FILES:
                if (run.path / name).is_file():
                    shutil.copyfile(run.path / name, partial / name)
            partial.rename(target)
        except OSError as exc:
            raise InputError(f"records: could not write {target} ({type(exc).__name__}: {exc})") from None
    return complete


def restore_records(planned: Sequence[PlannedRun], records: Path) -> list[PlannedRun]:
    """Copy into each new planned run the complete record ``records`` holds for it (none while
    ``records`` does not exist yet); the runs restored.

    The record's config keeps everything but where the run lives (``run.run_dir``, ``run.run_id``,
    set to the planned run's). A record started with other settings than the plan's, or not
    complete (it has no checkpoint to go on from), is refused; every record is checked before any
    is copied."""
    _check_records_dir(records)
    found = []
    for run in planned:
        source = run_path(records, run.method, run.seed)
        if run.state != "new" or not (source / CONFIG_FILE).is_file():
            continue
        steps = run.settings.optim.steps
        with _reading(source):
            if run_state(source, steps) != "complete":
                raise InputError(
                    f"{source} is not a complete {steps}-step run (a record has no checkpoint to resume "
                    "from); remove it or pass the steps it was run with"
                )
            text = _config_as_planned(source, run)
        differ = differences_from_plan(text, run.settings)
        if differ:
            raise ConflictError(
                f"the record {source} was run with other settings ({', '.join(differ[:8])} differ) than "
                "this comparison's; use the config it was run with, or other --records"
            )
        found.append((run, source, text))
    for run, source, text in found:
        run.path.mkdir(parents=True, exist_ok=True)
        for name in LOG_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, run.path / name)
        write_atomic(run.path / CONFIG_FILE, text)  # last: a config.json marks the run as there
    return [run for run, _, _ in found]


def _check_records_dir(records: Path) -> None:
    if records.exists() and not records.is_dir():
        raise InputError(f"records: {records} is not a directory")


def _config_as_planned(source: Path, run: PlannedRun) -> str:
    """The record's config.json with the planned run's place (``run.run_dir``, ``run.run_id``)."""
    config = json.loads((source / CONFIG_FILE).read_text(encoding="utf-8"))
    config["run"]["run_dir"] = str(run.settings.run.run_dir)
    config["run"]["run_id"] = run.settings.run.run_id
    return json.dumps(config, indent=2) + "\n"


def _check_same_run(target: Path, run: PlannedRun) -> None:
    """``target`` (a record already there) holds ``run`` itself: its settings and its logs."""
    if not target.is_dir():
        raise InputError(f"records: {target} is not a directory")
    with _reading(target):
        differ = differences_from_plan(_config_as_planned(target, run), run.settings)
    if differ:
        raise ConflictError(
            f"records: {target} holds a run with other settings ({', '.join(differ[:8])} differ) than "
            f"{run.path}; not replaced: remove it, or pass other --records"
        )
    changed = [n for n in LOG_FILES if _read_bytes(target / n) != _read_bytes(run.path / n)]
    if changed:
        raise ConflictError(
            f"records: {target} holds another run of the same settings ({', '.join(changed)} differ "
            f"from {run.path}'s); not replaced: remove it to record this one"
        )


def _read_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@contextmanager
def _reading(source: Path) -> Iterator[None]:
    """A record that cannot be read (a cut-off line, a config without its run table) is named."""
    try:
        yield
    except TurnOPDError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"records: {source} cannot be read ({type(exc).__name__}: {exc})") from None
