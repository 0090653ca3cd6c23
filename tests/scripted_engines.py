"""The base of the tests' scripted generation engines: each answers prompts by a rule of its own
(``generate``) and takes no weights; this is the rest of the engine interface they share."""

from collections.abc import Mapping

from services.rollout_worker.engines import GenerationEngine


class ScriptedEngine(GenerationEngine):
    """An engine whose answers a test scripts; ``end`` is the token that ends each answer."""

    kind = "transformers"

    def __init__(self, end: int) -> None:
        self._end = end

    def load_weights(self, state_dict: Mapping[str, object], version: int, *, rewind: bool = False) -> None:  # type: ignore[override]
        raise NotImplementedError("a scripted engine takes no weights")

    @property
    def weights_version(self) -> int:
        return 0

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self._end,)

    @property
    def max_positions(self) -> int:
        return 8192
