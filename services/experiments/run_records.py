"""A comparison's complete runs kept as small records, and brought back into a comparison directory.

A record is what the analysis of a complete run reads (config.json, metrics.jsonl, eval.jsonl) and
the controller's decisions, without checkpoints, models or logs: a few tens of KB a run. Kept under
``RECORDS/<method>/seed<s>/`` (the comparison directory's own layout), they let a benchmark whose
runs take hours each be spread over machines that do not share a disk: runs done on one are
recorded, and on the next a complete run found in the records is not trained again.
"""

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from services.errors import ConflictError, InputError
from services.experiments.compare_dir import run_path, run_state, write_atomic
from services.experiments.compare_plan import PlannedRun, differences_from_plan
from services.run_dir import CONFIG_FILE, DECISIONS_FILE, EVAL_FILE, METRICS_FILE

RECORD_FILES = (CONFIG_FILE, METRICS_FILE, EVAL_FILE, DECISIONS_FILE)


def save_records(planned: Sequence[PlannedRun], records: Path) -> list[PlannedRun]:
    """Copy the record of every complete planned run into ``records``; the runs recorded."""
    saved = []
    for run in planned:
        if run_state(run.path, run.settings.optim.steps) != "complete":
            continue
        target = run_path(records, run.method, run.seed)
        target.mkdir(parents=True, exist_ok=True)
        for name in RECORD_FILES:
            if (run.path / name).is_file():
                write_atomic(target / name, (run.path / name).read_text(encoding="utf-8"))
        saved.append(run)
    return saved


def restore_records(planned: Sequence[PlannedRun], records: Path) -> list[PlannedRun]:
    """Copy into each new planned run the complete record ``records`` holds for it (none while
    ``records`` does not exist yet); the runs restored.

    The record's config keeps everything but where the run lives (``run.run_dir``, ``run.run_id``,
    set to the planned run's). A record started with other settings than the plan's, or not
    complete (it has no checkpoint to go on from), is refused before anything is copied."""
    if records.exists() and not records.is_dir():
        raise InputError(f"records: {records} is not a directory")
    restored = []
    for run in planned:
        source = run_path(records, run.method, run.seed)
        if run.state != "new" or not (source / CONFIG_FILE).is_file():
            continue
        steps = run.settings.optim.steps
        if run_state(source, steps) != "complete":
            raise InputError(
                f"{source} is not a complete {steps}-step run (a record has no checkpoint to resume "
                "from); remove it or pass the steps it was run with"
            )
        config = json.loads((source / CONFIG_FILE).read_text(encoding="utf-8"))
        config["run"]["run_dir"] = str(run.settings.run.run_dir)
        config["run"]["run_id"] = run.settings.run.run_id
        text = json.dumps(config, indent=2) + "\n"
        differ = differences_from_plan(text, run.settings)
        if differ:
            raise ConflictError(
                f"the record {source} was run with other settings ({', '.join(differ[:8])} differ) than "
                "this comparison's; use the config it was run with, or other --records"
            )
        run.path.mkdir(parents=True, exist_ok=True)
        for name in RECORD_FILES[1:]:
            if (source / name).is_file():
                shutil.copyfile(source / name, run.path / name)
        write_atomic(run.path / CONFIG_FILE, text)  # last: a config.json marks the run as there
        restored.append(run)
    return restored
