"""The decode step's kernels (``decode_kernels.c``), compiled for this machine on first use and
called through ``ctypes``.

At batch 4 a decode step reads the weights once and every row's keys and values once; it is bound
by memory bandwidth. On the CPU, MKL's GEMM at M = 4 and PyTorch's attention for one query stream
their operand at about half of what a plain vectorised loop reaches (``bench/decode_ceiling.py``),
so the KV-slot path (``qwen3_decode.py``) runs these instead where they are available:

* ``matmul(x, w, ...)``: ``x @ w.T`` for a few rows, with an RMSNorm or a SiLU gate before it and
  the residual add after it fused in;
* ``decode_attention(...)``: for each sequence of a batch, RMS-norm and rotate its new query and
  key heads, write its key and value into its slot and attend over the slot, all rows of one
  layer in one call;
* ``sample(...)``: the next token of each row by inverse CDF, as ``sampler.sample_tokens`` does.

Built with ``-O3 -march=native`` into ``<cache root>/kernels/decode-<key>.so`` by
``native_build.py`` (keyed by source, flags and CPU; safe when workers build at once; loaded only
if its digest is the one recorded when it was built). Every entry is called through the checks
``native_abi.py`` generates from ``ENTRIES`` below (dtype, device, contiguity, every size the C
relies on: a ``KernelArgumentError`` naming the argument otherwise), and the wrappers here check
what the table cannot see (that a slot has the layer, heads and head size of the call). Before it
is used, a library must match torch on a small problem. Where there is no compiler or the build
fails, ``load_kernels`` says why and the engine keeps torch's ops (the same numbers within float32
rounding, slower).
"""

import ctypes
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services import native_abi, native_build
from services.native_abi import Entry, KernelArgumentError, Param
from services.native_build import NativeBuildError, NativeSource
from services.rollout_worker.engines.sampler import no_distribution

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("decode_kernels.c")
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
    "-fPIC",
    "-shared",
)
DECODE_SOURCE = NativeSource(SOURCE, "decode", FLAGS)
KernelBuildError = NativeBuildError

F32, CF32, I64, CI64 = "float *", "const float *", "int64_t *", "const int64_t *"
ENTRIES = (
    Entry(
        "skinny_matmul",
        "void",
        (
            Param(CF32, "x", "n * inner * (2 if glu else 1)"),
            Param(CF32, "w", "out * inner"),
            Param("int", "n"),
            Param("int", "inner"),
            Param("int", "out"),
            Param(F32, "y", "n * out"),
            Param(CF32, "norm_weight", "inner", nullable=True),
            Param("float", "eps"),
            Param("int", "glu"),
            Param("int", "accumulate"),
            Param(F32, "scratch", "n * inner", nullable=True),
        ),
        requires=(
            "n >= 0 and inner >= 0 and out >= 0",
            "scratch is not None or (norm_weight is None and not glu)",
        ),
    ),
    Entry(
        "decode_attention",
        "int",
        (
            Param(F32, "qkv", "rows * qkv_stride"),
            Param("int", "rows"),
            Param("int", "qkv_stride"),
            Param(CI64, "slots", "rows"),
            Param(CI64, "capacities", "rows"),
            Param(CI64, "positions", "rows"),
            Param("int", "layer"),
            Param("int", "heads"),
            Param("int", "kv_heads"),
            Param("int", "dim"),
            Param("float", "scale"),
            Param(CF32, "qk_norm", "(heads + kv_heads) * dim", nullable=True),
            Param(CF32, "cos_table", "table_rows * dim", nullable=True),
            Param(CF32, "sin_table", "table_rows * dim", nullable=True),
            Param("int", "table_rows"),
            Param("float", "eps"),
            Param(F32, "work", "work_floats"),
            Param("int64_t", "work_floats"),
            Param(F32, "out", "rows * heads * dim"),
        ),
        requires=(
            "rows >= 0 and heads > 0 and kv_heads > 0 and dim > 0 and table_rows >= 0",
            "qkv_stride >= (heads + 2 * kv_heads) * dim",
            "qk_norm is None or (cos_table is not None and sin_table is not None)",
        ),
    ),
    Entry(
        "sample_rows",
        "int",
        (
            Param(CF32, "logits", "rows * vocab"),
            Param("int", "rows"),
            Param("int", "vocab"),
            Param("float", "temperature"),
            Param(CF32, "uniform", "rows", nullable=True),
            Param(I64, "ids", "rows"),
            Param(F32, "logprobs", "rows"),
            Param(F32, "scratch", "vocab"),
        ),
        requires=("rows >= 0 and vocab > 0", "temperature == 0 or uniform is not None"),
    ),
)


@dataclass(frozen=True)
class DecodeKernels:
    """The loaded library: ``matmul`` and ``decode_attention`` over CPU float32 tensors."""

    path: Path
    _lib: ctypes.CDLL
    _entries: dict[str, Callable[..., Any]]

    def matmul(
        self,
        x_N_I: "torch.Tensor",
        weight_O_I: "torch.Tensor",
        *,
        norm: "torch.Tensor | None" = None,
        eps: float = 0.0,
        glu: bool = False,
        into: "torch.Tensor | None" = None,
    ) -> "torch.Tensor":
        """``f(x) @ weight.T`` for contiguous float32 CPU tensors, where ``f`` is an RMSNorm with weight
        ``norm`` (and ``eps``), or with ``glu`` ``silu(gate) * up`` of ``x = [gate | up]`` (twice
        the weight's width), or nothing. Added into ``into`` (``[N, O]``, returned) where given."""
        import torch

        if x_N_I.dim() != 2 or weight_O_I.dim() != 2:
            raise KernelArgumentError(
                f"matmul: x {tuple(x_N_I.shape)} and weight {tuple(weight_O_I.shape)} must be 2-d"
            )
        n, width = x_N_I.shape
        out, inner = weight_O_I.shape
        if width != (2 * inner if glu else inner):
            raise KernelArgumentError(
                f"matmul: x is [{n}, {width}] but the weight [{out}, {inner}]"
                + (" (glu: x must be twice as wide)" if glu else "")
            )
        if norm is not None and norm.shape != (inner,):
            raise KernelArgumentError(f"matmul: norm weight {tuple(norm.shape)} for width {inner}")
        if into is not None and into.shape != (n, out):
            raise KernelArgumentError(f"matmul: into is {tuple(into.shape)}, not [{n}, {out}]")
        y_N_O = torch.empty((n, out), dtype=torch.float32) if into is None else into
        scratch = torch.empty(n * inner, dtype=torch.float32) if norm is not None or glu else None
        self._entries["skinny_matmul"](
            x_N_I, weight_O_I, n, inner, out, y_N_O, norm, eps, int(glu), int(into is not None), scratch
        )
        return y_N_O

    def decode_attention(
        self,
        qkv_N_F: "torch.Tensor",
        batch: "SlotBatch",
        layer: int,
        heads: int,
        kv_heads: int,
        dim: int,
        rope: "Rope | None" = None,
    ) -> "torch.Tensor":
        """One layer for rows that each feed one token. With ``rope``, each query and key head of
        ``qkv`` is first RMS-normed and rotated at its row's position (in place); then each row's new
        key and value (``qkv`` after its queries) go into its slot at its position, and its queries
        attend over positions ``[0, position]``. Returns ``[N, heads * dim]``."""
        import torch

        rows = qkv_N_F.shape[0] if qkv_N_F.dim() == 2 else -1
        if rows != batch.rows:
            raise KernelArgumentError(f"decode_attention: qkv {tuple(qkv_N_F.shape)} for {batch.rows} rows")
        if not 0 <= layer < batch.layers or (kv_heads, dim) != (batch.kv_heads, batch.dim):
            raise KernelArgumentError(
                f"decode_attention: layer {layer}, {kv_heads} kv heads of {dim} for slots of "
                f"{batch.layers} layers, {batch.kv_heads} kv heads of {batch.dim}"
            )
        if rope is not None:
            rope.check(heads + kv_heads, dim, int(batch.positions.max()) + 1)
        out_N_HD = torch.empty((rows, heads * dim), dtype=torch.float32)
        failed = self._entries["decode_attention"](
            qkv_N_F,
            rows,
            qkv_N_F.shape[1],
            batch.slots,
            batch.capacities,
            batch.positions,
            layer,
            heads,
            kv_heads,
            dim,
            dim**-0.5,
            None if rope is None else rope.qk_norm,
            None if rope is None else rope.cos,
            None if rope is None else rope.sin,
            0 if rope is None else rope.cos.shape[0],
            0.0 if rope is None else rope.eps,
            batch.work,
            batch.work.numel(),
            out_N_HD,
        )
        if failed:
            raise KernelArgumentError(
                f"decode_attention refused: heads {heads}, kv heads {kv_heads}, dim {dim}, positions "
                f"{batch.positions.tolist()} in capacities {batch.capacities.tolist()}, work of "
                f"{batch.work.numel()} floats"
            )
        return out_N_HD

    def sample(
        self, logits_B_V: "torch.Tensor", temperature: float, generator: "torch.Generator"
    ) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``sampler.sample_tokens`` in one pass per row: the same uniform draws from ``generator``
        (none at temperature 0), the same distribution and log-probs (to float32 rounding)."""
        import torch

        uniform_B = None
        if temperature != 0.0:
            uniform_B = torch.rand((logits_B_V.shape[0], 1), generator=generator, dtype=torch.float32)
        return self.tokens_at(logits_B_V, temperature, uniform_B)

    def tokens_at(
        self, logits_B_V: "torch.Tensor", temperature: float, uniform_B: "torch.Tensor | None"
    ) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``sampler.tokens_at``: the tokens given each row's uniform (``NoDistributionError`` for a
        row with a NaN or +inf, or all -inf)."""
        import torch

        if logits_B_V.dim() != 2:
            raise KernelArgumentError(f"sample: logits {tuple(logits_B_V.shape)} must be [rows, vocab]")
        logits_B_V = logits_B_V.float().contiguous()
        rows, vocab = logits_B_V.shape
        ids_B = torch.empty(rows, dtype=torch.int64)
        logprobs_B = torch.empty(rows, dtype=torch.float32)
        scratch_V = torch.empty(vocab, dtype=torch.float32)
        refused = self._entries["sample_rows"](
            logits_B_V, rows, vocab, temperature, uniform_B, ids_B, logprobs_B, scratch_V
        )
        if refused:
            row = abs(refused) - 1
            raise no_distribution(row, float("-inf") if refused < 0 else float("nan"))
        return ids_B, logprobs_B


@dataclass(frozen=True)
class Rope:
    """Per-head RMSNorm and rotary embedding of queries and keys: ``qk_norm`` ``[heads + kv_heads,
    dim]`` (each query head's norm weight, then each key head's), rotary ``cos`` and sign-folded
    ``sin`` ``[positions, dim]`` (``x * cos + roll(x, dim / 2) * sin`` rotates ``x``)."""

    qk_norm: "torch.Tensor"
    cos: "torch.Tensor"
    sin: "torch.Tensor"
    eps: float

    def check(self, heads: int, dim: int, positions: int) -> None:
        tables_fit = self.cos.shape == self.sin.shape and self.cos.shape[1:] == (dim,)
        if (
            self.qk_norm.shape != (heads, dim)
            or not tables_fit
            or self.cos.shape[0] < positions
            or not all(t.is_contiguous() for t in (self.qk_norm, self.cos, self.sin))
        ):
            raise KernelArgumentError(
                f"rope: qk_norm {tuple(self.qk_norm.shape)}, tables {tuple(self.cos.shape)} and "
                f"{tuple(self.sin.shape)} for {heads} heads of {dim} up to position {positions - 1}"
            )


@dataclass(frozen=True)
class SlotBatch:
    """What ``decode_attention`` needs of one decode step's rows, built once for all layers: each
    row's slot address and capacity, its position, and scratch for the scores. ``keep`` holds the
    slot tensors, so their addresses stay valid while the batch is in use."""

    slots: "torch.Tensor"  # int64 addresses
    capacities: "torch.Tensor"  # int64
    positions: "torch.Tensor"  # int64
    work: "torch.Tensor"  # float32, >= group * (max position + 1)
    keep: tuple["torch.Tensor", ...]
    layers: int  # what every slot holds: layers, kv heads, head size
    kv_heads: int
    dim: int

    @property
    def rows(self) -> int:
        return int(self.slots.shape[0])


def slot_batch(kvs: "list[torch.Tensor]", positions: list[int], group: int) -> SlotBatch:
    """A ``SlotBatch`` over the slot tensors ``kvs`` (``[layers, 2, kv_heads, capacity, dim]``,
    contiguous float32) at ``positions``."""
    import torch

    if not kvs:
        raise KernelArgumentError("slot_batch: no slots")
    shape = tuple(kvs[0].shape)
    for kv, position in zip(kvs, positions, strict=True):
        fits = kv.dim() == 5 and kv.shape[1] == 2 and 0 <= position < kv.shape[3]
        if not fits or not kv.is_contiguous() or kv.dtype != torch.float32 or not kv.is_cpu:
            raise KernelArgumentError(
                f"a slot {tuple(kv.shape)} {kv.dtype} on {kv.device} cannot take position {position}"
            )
        if (kv.shape[0], kv.shape[2], kv.shape[4]) != (shape[0], shape[2], shape[4]):
            raise KernelArgumentError(f"slots {shape} and {tuple(kv.shape)} differ in layers or heads")
    return SlotBatch(
        slots=torch.tensor([kv.data_ptr() for kv in kvs], dtype=torch.int64),
        capacities=torch.tensor([kv.shape[3] for kv in kvs], dtype=torch.int64),
        positions=torch.tensor(positions, dtype=torch.int64),
        work=torch.empty(group * (max(positions) + 1), dtype=torch.float32),
        keep=tuple(kvs),
        layers=shape[0],
        kv_heads=shape[2],
        dim=shape[4],
    )


def library_path(cache_root: Path) -> Path:
    """Where the library for this source, these flags and this CPU lives under ``cache_root``."""
    return DECODE_SOURCE.library_path(cache_root)


def _bind(path: Path, lib: ctypes.CDLL) -> DecodeKernels:
    native_abi.check_against_source(ENTRIES, SOURCE.read_text(), SOURCE.name)
    return DecodeKernels(path, lib, native_abi.bind(lib, ENTRIES))


def _self_check(kernels: DecodeKernels) -> None:
    """Both kernels, with and without their fused norms, against torch on a small grouped-query
    problem (a miscompiled library fails)."""
    from services.rollout_worker.engines import kernel_reference as ref

    failures = ref.disagreements(kernels)
    if failures:
        raise KernelBuildError(f"{kernels.path.name} disagrees with torch: {'; '.join(failures)}")


def load_kernels(cache_root: Path) -> DecodeKernels:
    """The kernels for this machine, built under ``cache_root`` if need be and checked against
    torch; ``KernelBuildError`` says why they cannot be had."""
    path, lib = native_build.load(DECODE_SOURCE, cache_root)
    try:
        kernels = _bind(path, lib)
    except AttributeError as exc:  # a symbol missing from the library
        raise KernelBuildError(f"cannot load {path}: {exc}") from None
    _self_check(kernels)
    return kernels


@functools.cache
def available_kernels(cache_root: Path) -> DecodeKernels | str:
    """``load_kernels`` once per process and cache root: the kernels, or why there are none (logged
    once as a warning; the engine then keeps torch's ops)."""
    try:
        return load_kernels(cache_root)
    except KernelBuildError as exc:
        log.warning("decode kernels unavailable, torch's ops instead (slower): %s", exc)
        return str(exc)
