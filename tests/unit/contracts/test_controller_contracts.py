import pytest
from pydantic import ValidationError

from services.contracts.controller import StepDecision

DECISION = {
    "step": 3,
    "probe": False,
    "h_roll": 5,
    "h_hat": 5,
    "h_bar": 4.5,
    "h_eff": 2,
    "h_cov": 2,
    "h_ctrl": 2,
}


def test_a_plan_basis_is_written_only_under_staleness():
    synchronous = StepDecision.model_validate(DECISION)  # every line written before staleness existed
    assert synchronous.planned_from is None and "planned_from" not in synchronous.model_dump_json()
    lagged = StepDecision(**DECISION, planned_from=1)
    assert lagged.model_dump()["planned_from"] == 1
    assert StepDecision.model_validate_json(lagged.model_dump_json()) == lagged


def test_a_step_is_planned_from_an_earlier_step():
    with pytest.raises(ValidationError, match="step 3 cannot be planned from step 3"):
        StepDecision(**DECISION, planned_from=3)
