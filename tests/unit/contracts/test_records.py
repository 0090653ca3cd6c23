"""Run-file lines keep their shape: fields added for multi-environment runs are left out while None."""

import json

from services.contracts.base import Record
from services.contracts.controller import StepDecision
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord


def test_every_run_file_record_leaves_out_its_later_fields_while_none():
    assert {c: c.LEFT_OUT_WHEN_NONE for c in (StepDecision, TurnStatsRecord, StepMetrics, EvalRecord)} == {
        StepDecision: ("planned_from", "env"),
        TurnStatsRecord: ("env",),
        StepMetrics: ("sources", "failure_reasons"),
        EvalRecord: ("env", "failed_episodes"),
    }
    for kind in (StepDecision, TurnStatsRecord, StepMetrics, EvalRecord):
        assert issubclass(kind, Record) and set(kind.LEFT_OUT_WHEN_NONE) <= set(kind.model_fields)


def test_an_eval_line_from_before_sources_reads_and_writes_the_same():
    line = {"step": 3, "cumulative_s": 12.5, "split": "valid_unseen", "episodes": 4, "n": 1,
            "success_rate": 0.25, "avg_at_n": 0.25, "per_task_type": {"a": 0.25}}  # fmt: skip
    record = EvalRecord.model_validate(line)
    assert record.env is None and json.loads(record.model_dump_json()) == line
    tagged = record.model_copy(update={"env": "search"})
    assert json.loads(tagged.model_dump_json()) == {**line, "env": "search"}
