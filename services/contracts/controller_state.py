"""The controller service's persisted state.  # controller <-> Redis, controller -> status tools"""

from pydantic import Field

from services.contracts.base import Contract, NonNegInt
from services.contracts.controller import DepthState, StepDecision
from services.contracts.method import Method


class ControllerState(Contract):
    """Everything a fresh controller process needs to resume exactly where the last one stopped."""

    run_id: str = Field(min_length=1)
    method: Method
    total_steps: int = Field(ge=1, description="K of the run (the blend schedule's horizon).")
    depth: DepthState
    probes: NonNegInt = Field(0, description="Probe batches ingested so far.")
    last: StepDecision | None = Field(None, description="Decision of the last completed step.")
