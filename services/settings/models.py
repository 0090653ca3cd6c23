"""Settings of the models: which student and teacher, where the zoo is cached, how generation runs."""

from pathlib import Path
from typing import Literal

from pydantic import Field

from services.settings_section import Section

EntityEmbeddings = Literal["random", "composed"]
EngineKind = Literal["transformers", "vllm"]
PREFIX_CACHE_MB = 256  # the run's default, and every engine constructor's
DTypeName = Literal["float32", "bfloat16", "float16"]


class ModelsSettings(Section):
    # The models being trained and scored and the zoo they come from never change mid-run; a restarted
    # rollout worker may change how it generates (engine, dtype, device, response length, caches).
    RUN_DEFINING = frozenset(
        {"student", "teacher", "cache_dir", "seed", "vocab_size", "entity_max_number", "entity_embeddings"}
    )

    student: str = Field(
        "student",
        min_length=1,
        description="Student: a zoo name under <cache_dir>/models/ or a checkpoint path.",
    )
    teacher: str = Field(
        "teacher",
        min_length=1,
        description="Teacher: a zoo name under <cache_dir>/models/ or a checkpoint path.",
    )
    cache_dir: Path | None = Field(
        default=None,
        description="Cache root, holding models/ (unset: $TURNOPD_CACHE_DIR, else ~/.cache/turnopd).",
    )
    seed: int = Field(0, ge=0, description="Seed of the zoo build: tokenizer corpus and weight init.")
    vocab_size: int = Field(8192, ge=271, le=65536, description="Max zoo tokenizer vocabulary.")
    entity_max_number: int = Field(
        20,
        ge=0,
        le=100,
        description="Zoo tokenizer: household entities ' <name> <n>' with n <= this are single tokens (0: none).",
    )
    entity_embeddings: EntityEmbeddings = Field(
        "random",
        description="Zoo build: initial rows of the entity tokens: 'random', or 'composed' from the kind "
        "word and the number (services.models.entity_init).",
    )
    dtype: DTypeName = Field("float32", description="Weight and activation dtype for loading models.")
    device: str = Field(
        "cpu", min_length=1, description="Torch device of the transformers engine ('auto': GPU if any)."
    )
    engine: EngineKind = Field("transformers", description="Rollout generation engine.")
    max_new_tokens: int = Field(96, ge=1, le=32768, description="Token limit of one assistant response.")
    prefix_cache_mb: int = Field(
        PREFIX_CACHE_MB,
        ge=0,
        description="Transformers engine: memory for KV states reused across turns (0: off, every turn "
        "prefills its whole context again; the KV slots then do not persist across calls).",
    )
    kv_slots: bool = Field(
        True,
        description="Transformers engine: a persistent KV slot per sequence and the functional Qwen3 "
        "decode step where the model allows it (fp32 Qwen3 on the CPU); false: the Hugging Face path "
        "everywhere (bench/eval_engines.py compares the two).",
    )
    native_kernels: bool = Field(
        True,
        description="KV-slot path: build its decode kernels (few-row matmul, one-token attention) with "
        "the C compiler ($CC or cc, -march=native) into <cache_dir>/kernels on first use; without a "
        "compiler, or false: torch's ops (the same numbers within float32 rounding, slower; "
        "bench/decode_ceiling.py compares them).",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.5, gt=0.0, le=1.0, description="Share of GPU memory a vLLM engine may take (weights + KV cache)."
    )
