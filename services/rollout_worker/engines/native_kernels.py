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
``native_build.py`` (keyed by source, flags and CPU; safe when workers build at once). Before it is
used, a library must match torch on a small problem. Where there is no compiler or the build fails, ``load_kernels`` says why and the
engine keeps torch's ops (the same numbers within float32 rounding, slower).
"""

import ctypes
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services import native_build
from services.native_build import NativeBuildError, NativeSource

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


@dataclass(frozen=True)
class DecodeKernels:
    """The loaded library: ``matmul`` and ``decode_attention`` over CPU float32 tensors."""

    path: Path
    _lib: ctypes.CDLL

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

        n, width = x_N_I.shape
        out, inner = weight_O_I.shape
        if width != (2 * inner if glu else inner) or not weight_O_I.is_contiguous():
            raise ValueError(
                f"matmul: x is [{n}, {width}] but the weight [{out}, {inner}]"
                + (" (glu: x must be twice as wide)" if glu else "")
                + ("" if weight_O_I.is_contiguous() else ", not contiguous")
            )
        if norm is not None and (norm.shape != (inner,) or not norm.is_contiguous()):
            raise ValueError(f"matmul: norm weight {tuple(norm.shape)} for width {inner}")
        if into is not None and (into.shape != (n, out) or not into.is_contiguous()):
            raise ValueError(f"matmul: into is {tuple(into.shape)}, not [{n}, {out}]")
        x_N_I = x_N_I.contiguous()
        y_N_O = torch.empty((n, out), dtype=torch.float32) if into is None else into
        scratch = torch.empty(n * inner, dtype=torch.float32) if norm is not None or glu else None
        self._lib.skinny_matmul(
            x_N_I.data_ptr(),
            weight_O_I.data_ptr(),
            n,
            inner,
            out,
            y_N_O.data_ptr(),
            None if norm is None else norm.data_ptr(),
            ctypes.c_float(eps),
            int(glu),
            int(into is not None),
            None if scratch is None else scratch.data_ptr(),
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

        rows = qkv_N_F.shape[0]
        if (
            not qkv_N_F.is_contiguous()
            or rows != batch.rows
            or qkv_N_F.shape[1] < (heads + 2 * kv_heads) * dim
        ):
            raise ValueError(f"decode_attention: qkv {tuple(qkv_N_F.shape)} for {batch.rows} rows")
        if rope is not None:
            rope.check(heads + kv_heads, dim, int(batch.positions.max()) + 1)
        out_N_HD = torch.empty((rows, heads * dim), dtype=torch.float32)
        failed = self._lib.decode_attention(
            qkv_N_F.data_ptr(),
            rows,
            qkv_N_F.shape[1],
            batch.slots.data_ptr(),
            batch.capacities.data_ptr(),
            batch.positions.data_ptr(),
            layer,
            heads,
            kv_heads,
            dim,
            ctypes.c_float(dim**-0.5),
            None if rope is None else rope.qk_norm.data_ptr(),
            None if rope is None else rope.cos.data_ptr(),
            None if rope is None else rope.sin.data_ptr(),
            ctypes.c_float(0.0 if rope is None else rope.eps),
            batch.work.data_ptr(),
            out_N_HD.data_ptr(),
        )
        if failed:
            raise ValueError(
                f"decode_attention refused: heads {heads}, kv heads {kv_heads}, dim {dim}, positions "
                f"{batch.positions.tolist()} in capacities {batch.capacities.tolist()}"
            )
        return out_N_HD

    def sample(
        self, logits_B_V: "torch.Tensor", temperature: float, generator: "torch.Generator"
    ) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``sampler.sample_tokens`` in one pass per row: the same uniform draws from ``generator``
        (none at temperature 0), the same distribution and log-probs (to float32 rounding)."""
        import torch

        logits_B_V = logits_B_V.float().contiguous()
        rows, vocab = logits_B_V.shape
        uniform_B = None
        if temperature != 0.0:
            uniform_B = torch.rand((rows, 1), generator=generator, dtype=torch.float32)
        ids_B = torch.empty(rows, dtype=torch.int64)
        logprobs_B = torch.empty(rows, dtype=torch.float32)
        scratch_V = torch.empty(vocab, dtype=torch.float32)  # held here: it must outlive the call
        self._lib.sample_rows(
            logits_B_V.data_ptr(),
            rows,
            vocab,
            ctypes.c_float(temperature),
            None if uniform_B is None else uniform_B.data_ptr(),
            ids_B.data_ptr(),
            logprobs_B.data_ptr(),
            scratch_V.data_ptr(),
        )
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
            raise ValueError(
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

    @property
    def rows(self) -> int:
        return int(self.slots.shape[0])


def slot_batch(kvs: "list[torch.Tensor]", positions: list[int], group: int) -> SlotBatch:
    """A ``SlotBatch`` over the slot tensors ``kvs`` (``[layers, 2, kv_heads, capacity, dim]``,
    contiguous float32) at ``positions``."""
    import torch

    for kv, position in zip(kvs, positions, strict=True):
        if not kv.is_contiguous() or kv.dtype != torch.float32 or not 0 <= position < kv.shape[3]:
            raise ValueError(f"a slot {tuple(kv.shape)} {kv.dtype} cannot take position {position}")
    return SlotBatch(
        slots=torch.tensor([kv.data_ptr() for kv in kvs], dtype=torch.int64),
        capacities=torch.tensor([kv.shape[3] for kv in kvs], dtype=torch.int64),
        positions=torch.tensor(positions, dtype=torch.int64),
        work=torch.empty(group * (max(positions) + 1), dtype=torch.float32),
        keep=tuple(kvs),
    )


def library_path(cache_root: Path) -> Path:
    """Where the library for this source, these flags and this CPU lives under ``cache_root``."""
    return DECODE_SOURCE.library_path(cache_root)


def _bind(path: Path, lib: ctypes.CDLL) -> DecodeKernels:
    pointer, i32 = ctypes.c_void_p, ctypes.c_int
    f32 = ctypes.c_float
    lib.skinny_matmul.argtypes = [pointer, pointer, i32, i32, i32, pointer, pointer, f32, i32, i32, pointer]
    lib.skinny_matmul.restype = None
    lib.decode_attention.argtypes = [pointer, i32, i32, pointer, pointer, pointer, i32, i32, i32, i32, f32]
    lib.decode_attention.argtypes += [pointer, pointer, pointer, f32, pointer, pointer]
    lib.decode_attention.restype = i32
    lib.sample_rows.argtypes = [pointer, i32, i32, f32, pointer, pointer, pointer, pointer]
    lib.sample_rows.restype = None
    return DecodeKernels(path, lib)


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
