"""Python callers' client of the teacher over a Serve deployment handle, retrying when a replica dies.

Scoring is a pure function of its input, so a request that was in flight on a dying replica is
simply sent again; Serve routes it to a live replica (or holds it until a new one is up).
"""

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.handle import DeploymentHandle

from services.contracts.teacher import (
    PackedScoreRequest,
    PackedScoreResponse,
    ScoreRequest,
    ScoreResponse,
    TeacherContext,
)
from services.errors import TurnOPDError
from services.ray_names import TEACHER_APP as APP_NAME
from services.ray_names import TEACHER_DEPLOYMENT as DEPLOYMENT_NAME
from services.teacher_scorer.codec import (
    pack_request,
    pack_rows,
    response_from_scores,
    rows_from_request,
    unpack_scores,
)
from services.teacher_scorer.engine import EngineBrokenError, RowScores, ScoreRow
from services.teacher_scorer.retry import RetryPolicy

log = logging.getLogger(__name__)

# RayActorError covers ActorDiedError and ActorUnavailableError; EngineBrokenError comes from a
# replica whose engine failed and which Serve is about to replace.
RETRYABLE: tuple[type[BaseException], ...] = (RayActorError, EngineBrokenError)


def _unwrap(exc: RayTaskError) -> BaseException:
    """The replica's own exception inside Ray's task-error wrapper (e.g. an InputError)."""
    cause = exc.cause
    return cause if isinstance(cause, BaseException) else exc


class TeacherHandleClient:
    """Scores through a teacher app's deployment handle (same Ray cluster and namespace; ``app``:
    `teacher`, or `teacher-<name>` in a multi-teacher run)."""

    def __init__(
        self,
        handle: DeploymentHandle | None = None,
        *,
        policy: RetryPolicy | None = None,
        app: str = APP_NAME,
    ) -> None:
        self._handle = handle if handle is not None else serve.get_deployment_handle(DEPLOYMENT_NAME, app)
        self._policy = policy or RetryPolicy()
        self.app = app
        self.retries = 0  # attempts that failed and were sent again, over this client's life

    async def score_packed(self, request: PackedScoreRequest) -> PackedScoreResponse:
        """Score a packed request; InputError for bad input (``SequenceTooLongError`` for a sequence
        longer than the teacher scores), retries on replica death."""
        response: PackedScoreResponse = await self._call("score_packed", request)
        return response

    async def limits(self) -> TeacherContext:
        """The longest sequence the teacher scores now (a replica's answer: after a restart, the new one's)."""
        context: TeacherContext = await self._call("limits")
        return context

    async def score_rows(self, rows: Sequence[ScoreRow], top_k: int | None = None) -> list[RowScores]:
        """Score numpy rows; ``top_k`` None means the deployment's distill_topk."""
        return unpack_scores(await self.score_packed(pack_rows(rows, top_k)))

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """Score a JSON-shaped request; it travels packed."""
        scores = unpack_scores(await self.score_packed(pack_request(request)))
        return response_from_scores(rows_from_request(request), scores)

    async def _call(self, method: str, *args: Any) -> Any:
        for attempt in range(1, self._policy.max_attempts + 1):
            try:
                return await getattr(self._handle, method).remote(*args)
            except RayTaskError as exc:
                cause = _unwrap(exc)
                if isinstance(cause, RETRYABLE) and attempt < self._policy.max_attempts:
                    error: BaseException = cause
                elif isinstance(cause, TurnOPDError):
                    raise cause from None  # the replica's typed error, e.g. InputError naming the problem
                else:
                    raise
            except RETRYABLE as exc:
                if attempt == self._policy.max_attempts:
                    raise
                error = exc
            self.retries += 1
            delay = self._policy.delay(attempt)
            log.warning("teacher call failed (%s), retry %d in %.1fs", type(error).__name__, attempt, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")
