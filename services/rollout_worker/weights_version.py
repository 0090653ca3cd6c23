"""The rule that keeps rollouts on-policy: a worker plays only with the weights version it is asked for."""

from services.errors import ConflictError


class StaleWeightsError(ConflictError):
    """A play request named a weights version other than the one the worker holds."""

    def __init__(self, worker: str, held: int, requested: int) -> None:
        super().__init__(
            f"{worker} holds weights version {held} but the request is for version {requested}; "
            "publish the weights to the worker first"
        )
        self.worker, self.held, self.requested = worker, held, requested

    def __reduce__(self) -> tuple[type["StaleWeightsError"], tuple[str, int, int]]:
        return StaleWeightsError, (self.worker, self.held, self.requested)


def check_weights_version(worker: str, held: int, requested: int) -> None:
    """Refuse to play on any version but the requested one."""
    if held != requested:
        raise StaleWeightsError(worker, held, requested)
