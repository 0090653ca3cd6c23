"""Weight reloads of a vLLM rollout engine.  # rollout_worker -> vLLM engine core -> GPU worker

vLLM's engine core runs in its own process and decodes ``collective_rpc`` arguments without type
information (a tensor arrives as ``[dtype, shape, buffer]``), so only these small messages cross it,
as plain dicts (``model_dump()`` out, ``model_validate`` in); the weights themselves travel as a
safetensors file on the node.
"""

from pydantic import Field

from services.contracts.base import Contract, NonNegInt


class WeightsUpdate(Contract):
    """A full set of weights, in Hugging Face names, to load as ``version``."""

    path: str = Field(
        min_length=1, description="Absolute path of a safetensors file the engine's GPU workers can read."
    )
    version: int = Field(ge=1, description="Weights version the file holds (the learner step).")


class WeightsLoadReport(Contract):
    """What one GPU worker set from a ``WeightsUpdate``."""

    version: int = Field(ge=1)
    loaded: NonNegInt = Field(description="Model parameters the file set (vLLM's own names).")
    not_loaded: list[str] = Field(description="Model parameters the file left as they were.")

    @property
    def complete(self) -> bool:
        return not self.not_loaded
