"""The one place where the gateway's errors become HTTP statuses (most specific class first): the app
answers by this table and every route documents its error answers from it."""

from services.contracts.env_gateway import ActionRejected
from services.env_gateway.episode_errors import (
    ActionRejectedError,
    EngineError,
    EpisodeLostError,
    GatewayBusyError,
)
from services.errors import ConfigError, ConflictError, InputError, NotFoundError, TurnOPDError
from services.http_responses import ErrorStatus, ErrorTable


def _rejection(exc: ActionRejectedError) -> ActionRejected:
    return ActionRejected(
        detail=exc.message, problems=exc.problems, admissible_actions=exc.admissible_actions
    )


GATEWAY_ERRORS = ErrorTable(
    ErrorStatus(NotFoundError, 404, "No such episode (never created, deleted, or expired)."),
    ErrorStatus(ConflictError, 409, "The episode is finished; start a new one."),
    ErrorStatus(EpisodeLostError, 410, "The episode's env worker died; the episode is gone."),
    ErrorStatus(
        ActionRejectedError,
        422,
        "The action is not admissible now; the game and the turn count are unchanged.",
        ActionRejected,
        _rejection,
    ),
    ErrorStatus(InputError, 422, "Well-formed but refused by the game (an unknown task type, say)."),
    ErrorStatus(GatewayBusyError, 503, "Every env worker hosts its maximum of episodes.", retry_after_s=1),
    ErrorStatus(ConfigError, 500, "The gateway is not set up for this env (missing game data, say)."),
    ErrorStatus(EngineError, 500, "The game engine failed on the request; the episode is closed."),
    ErrorStatus(TurnOPDError, 500, "The gateway failed."),
)
