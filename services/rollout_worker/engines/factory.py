"""Build a generation engine by kind (``models.engine`` in the settings)."""

from pathlib import Path

from services.errors import ConfigError
from services.rollout_worker.engines.base import GenerationEngine
from services.settings.models import PREFIX_CACHE_MB, EngineKind, ModelsSettings


def make_engine(
    kind: EngineKind,
    reference: str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
    cache_dir: Path | None = None,
    prefix_cache_mb: int = PREFIX_CACHE_MB,
    gpu_memory_utilization: float = 0.5,
    kv_slots: bool = True,
    native_kernels: bool = True,
) -> GenerationEngine:
    """A ``GenerationEngine`` of ``kind`` over the model ``reference`` (zoo name or checkpoint path)."""
    match kind:
        case "transformers":
            from services.rollout_worker.engines.transformers_engine import TransformersEngine

            return TransformersEngine.from_pretrained(
                reference,
                device=device,
                dtype=dtype,
                seed=seed,
                cache_dir=cache_dir,
                prefix_cache_mb=prefix_cache_mb,
                kv_slots=kv_slots,
                native_kernels=native_kernels,
            )
        case "vllm":
            from services.rollout_worker.engines.vllm_engine import VLLMEngine

            return VLLMEngine.from_pretrained(
                reference,
                dtype=dtype,
                seed=seed,
                gpu_memory_utilization=gpu_memory_utilization,
                cache_dir=cache_dir,
            )
        case _:
            raise ConfigError(f"unknown generation engine {kind!r}; use 'transformers' or 'vllm'")


def engine_from_settings(settings: ModelsSettings, reference: str, seed: int) -> GenerationEngine:
    """The engine the settings ask for, over ``reference`` (usually ``settings.student``)."""
    return make_engine(
        settings.engine,
        reference,
        device=settings.device,
        dtype=settings.dtype,
        seed=seed,
        cache_dir=settings.cache_dir,
        prefix_cache_mb=settings.prefix_cache_mb,
        gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
        kv_slots=settings.kv_slots,
        native_kernels=settings.native_kernels,
    )
