"""Errors of the env gateway's episode API, shared by the server and the client.

Like ``services.errors``, each class also subclasses the error it stands for and stays picklable
(arguments are kept in ``args``)."""

from services.errors import InputError, TurnOPDError


class ActionRejectedError(InputError):
    """The action is not admissible now (HTTP 422); the game and the turn count are unchanged."""

    def __init__(self, message: str, problems: list[str], admissible_actions: list[str]) -> None:
        super().__init__(message, problems, admissible_actions)
        self.message = message
        self.problems = problems
        self.admissible_actions = admissible_actions

    def __str__(self) -> str:
        return self.message


class EpisodeLostError(TurnOPDError):
    """The episode's env worker process died (and was replaced); the episode cannot go on (HTTP 410)."""


class GatewayBusyError(TurnOPDError):
    """Every env worker of this replica hosts its maximum of episodes (HTTP 503)."""


class EngineError(TurnOPDError, RuntimeError):
    """The game engine failed on a request; the episode is closed (HTTP 500)."""
