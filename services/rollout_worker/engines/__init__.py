"""Generation engines behind one interface (``GenerationEngine``): transformers (CPU/GPU) and vLLM (GPU).

Importing this package loads neither torch nor vLLM; the factory imports a backend when built.
"""

from services.rollout_worker.engines.base import Generation, GenerationEngine, GenerationParams
from services.rollout_worker.engines.factory import engine_from_settings, make_engine

__all__ = ["Generation", "GenerationEngine", "GenerationParams", "engine_from_settings", "make_engine"]
