"""The planner part of the step loop: each source's plan of a step from its controller, and the
step's outcome back into it (the controller client's calls block: they run off the loop).

``lag`` is ``[pipeline] max_staleness``: the plan of step k comes from the state after step
k-1-lag, as ``turnopd controller replay --lag`` reproduces it.
"""

from collections.abc import Sequence

from services.blocking import blocking
from services.contracts.controller import StepDecision, StepPlan
from services.contracts.records import TurnStatsRecord
from services.orchestrator.source_mix import ControllerLike, SourceBatch, StepSources


class Planner:
    def __init__(self, controller: ControllerLike, sources: StepSources, lag: int) -> None:
        self.controller = controller
        self.sources = sources
        self.lag = lag

    async def plans(self, step: int, version: int) -> list[StepPlan]:
        """Each source's plan of ``step``, to play with weights ``version``."""
        plans = await blocking(self.sources.plans, self.controller, step, self.lag)
        return [plan.model_copy(update={"weights_version": version}) for plan in plans]

    async def ingest(
        self, step: int, parts: Sequence[SourceBatch], records: Sequence[TurnStatsRecord]
    ) -> list[StepDecision]:
        """Complete ``step`` in every source's controller; their decisions."""
        return await blocking(self.sources.ingest, self.controller, step, parts, records, self.lag)
