"""``DIR/plan.json``: every service's and driver part's piece of the settings, secrets masked."""

import json
from pathlib import Path

from services.operations.managed_service import RunContext
from services.operations.plan_file import PLAN_FILE, write_plan
from services.operations.run_pieces import RunPieces
from services.operations.run_services import Services
from services.orchestrator.run_plan import LoopSettings
from services.run_dir import RunDir
from services.settings import TurnOPDSettings


def test_the_plan_holds_each_services_piece_and_each_parts_with_secrets_masked(tmp_path: Path):
    settings = TurnOPDSettings.model_validate(
        {"security": {"service_token": "s3cret-token"}, "rollout_worker": {"max_attempts": 5}}
    )
    run = RunDir(tmp_path)
    services = Services.of(RunContext(pieces=RunPieces.of(settings), run=run, run_id="r"))
    write_plan(run, services, {"step_loop": LoopSettings.of(settings)})
    text = (tmp_path / PLAN_FILE).read_text()
    assert "s3cret-token" not in text and "**********" in text
    plan = json.loads(text)
    assert sorted(plan["services"]) == sorted(
        ["redis", "controller", "env-gateway", "teacher", "rollout-worker", "learner"]
    )
    assert plan["services"]["rollout-worker"]["rollout_worker"]["max_attempts"] == 5
    assert plan["services"]["learner"]["learner"]["max_restarts"] == 3
    assert plan["driver"]["step_loop"]["staleness"] == 0
    assert plan["driver"]["step_loop"]["play"]["max_infra_failure_frac"] == 0.25
    assert "max_attempts" not in json.dumps(plan["services"]["learner"])  # each holds its own piece only
