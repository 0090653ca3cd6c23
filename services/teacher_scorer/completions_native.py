"""The ``/v1/completions`` codec's writer and reader compiled for this machine
(``completions_kernels.c``), called through ``ctypes``.

``completions_codec`` uses them where they are available: our app writes each prompt's
``prompt_logprobs`` with ``positions_json``, and the endpoint client reads a whole answer with
``parse`` into flat arrays and picks each scored position's top-K from them with ``select_top_k``.
In Python the two cost ~30 and ~60 µs per scored token at K = 50, in C ~6 and ~6
(``bench/teacher_throughput.py``).

Each entry is declared once, in ``ENTRIES`` below, as its C prototype spells it, with the elements
each pointer touches; ``native_abi.py`` sets the ctypes types from it, refuses a library whose
source's prototypes differ, and checks every array's dtype, contiguity and length and every int
before the C runs (``KernelArgumentError``, a ValueError, naming the argument). Each wrapper adds
the shapes and index ranges that depend on the data, and raises ValueError or TypeError naming the
argument; the reader's buffers are sized so that no
answer can fill them, and its selection takes O(e log e) for a position of e entries, so a hostile
answer costs time and memory linear in its bytes.

Built by ``native_build.py`` into ``<cache root>/kernels/completions-<key>.so``. Before it is used,
a library must write and read a small answer exactly as the Python codec does. Where there is no
compiler, or the build or that check fails, ``available_codec_kernels`` says why once and the codec
stays in Python (the same answers, slower).
"""

import ctypes
import functools
import itertools
import logging
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from services import native_abi, native_build
from services.cache_dir import resolve_cache_dir
from services.native_abi import Entry, Param
from services.native_build import NativeBuildError, NativeSource
from services.teacher_scorer.completions_codec import (
    completion_json,
    python_scores_from_completion,
    topk_tail_entropies,
)
from services.teacher_scorer.engine import RowScores, ScoreRow

log = logging.getLogger(__name__)

# No fast-math: the writer's digits and the reader's numbers must round exactly as Python's do.
CODEC_SOURCE = NativeSource(
    Path(__file__).with_name("completions_kernels.c"),
    "completions",
    ("-O3", "-march=native", "-fPIC", "-shared"),
)
# The longest one position's entry can be in the writer (completions_kernels.c: ENTRY_BYTES).
_ENTRY_BYTES = 96
# The fewest bytes of JSON each parsed item takes with the comma after it
# ('{"index":0,"prompt_logprobs":[]}', '{},', '"1":{"logprob":0},', '1,'), less one: capacities from
# the answer's length that no answer can fill (the last item of a list has no comma, but its list
# has brackets; tests/unit/teacher_scorer/test_completions_native.py fills each).
_MIN_CHOICE_BYTES, _MIN_POSITION_BYTES, _MIN_ENTRY_BYTES, _MIN_TOKEN_BYTES = 30, 3, 17, 2
_FULL = -2  # parse_answer: an output buffer is full (REFUSED, -1: the answer is read in Python)

I64, CI64, F32, CF32, F64, CF64 = (
    "int64_t *",
    "const int64_t *",
    "float *",
    "const float *",
    "double *",
    "const double *",
)
ENTRIES = (
    Entry(
        "write_positions",
        "int64_t",
        (
            Param(CI64, "prompt", "n_prompt"),
            Param("int64_t", "n_prompt"),
            Param(CI64, "top_ids", "max(n_prompt - 1, 0) * k"),
            Param(CF32, "top_lps", "max(n_prompt - 1, 0) * k"),
            Param(CF32, "token_lp", "max(n_prompt - 1, 0)"),
            Param("int64_t", "k"),
            Param("char *", "out", "out_capacity"),
            Param("int64_t", "out_capacity"),
        ),
        requires=("n_prompt >= 0 and k >= 0 and out_capacity >= 0",),
        arrays="numpy",
    ),
    Entry(
        "parse_answer",
        "int",
        (
            Param("const char *", "body", "length"),
            Param("int64_t", "length"),
            Param(I64, "counts", "4"),
            Param(I64, "choice", "choices_cap * 5"),
            Param("int64_t", "choices_cap"),
            Param(I64, "position", "positions_cap * 2"),
            Param("int64_t", "positions_cap"),
            Param(I64, "entry_id", "entries_cap"),
            Param(F64, "entry_lp", "entries_cap"),
            Param(I64, "entry_rank", "entries_cap"),
            Param("int64_t", "entries_cap"),
            Param(I64, "token", "tokens_cap"),
            Param("int64_t", "tokens_cap"),
        ),
        requires=("length >= 0 and min(choices_cap, positions_cap, entries_cap, tokens_cap) >= 0",),
        arrays="numpy",
    ),
    Entry(  # the entries and positions `at` indexes, and the scratch, are sized by the data: the wrapper checks them
        "select_top_k",
        "int",
        (
            Param(CI64, "position"),
            Param(CI64, "entry_id"),
            Param(CF64, "entry_lp"),
            Param(CI64, "entry_rank"),
            Param(CI64, "at", "n"),
            Param(CI64, "token", "n"),
            Param("int64_t", "n"),
            Param("int64_t", "k"),
            Param(I64, "top_ids", "n * k"),
            Param(F32, "top_lps", "n * k"),
            Param(F32, "token_lp", "n"),
            Param(I64, "scratch"),
        ),
        requires=("n >= 0 and k >= 0",),
        arrays="numpy",
    ),
)


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer read into flat arrays. ``choice_C_5``: index, first position, positions, first
    token, tokens (-1: no ``prompt_token_ids``), per choice as they came; ``position_Q_2``: first
    entry, entries (-1: null); each entry's token id, log-prob and rank (INT64_MIN: none, or not an
    integer); ``token_T``: the choices' ``prompt_token_ids``, one after another."""

    choice_C_5: np.ndarray
    position_Q_2: np.ndarray
    entry_id_E: np.ndarray
    entry_lp_E: np.ndarray
    entry_rank_E: np.ndarray
    token_T: np.ndarray


@dataclass(frozen=True)
class CodecKernels:
    """The loaded library."""

    path: Path
    _lib: ctypes.CDLL
    _entries: dict[str, Callable[..., Any]]

    def positions_json(self, prompt_T: np.ndarray, scores: RowScores) -> bytes | None:
        """``prompt_logprobs`` of one prompt, as the Python writer writes it (None: a log-prob is not
        finite, which JSON cannot carry; the Python writer then writes what it writes)."""
        prompt_T = _checked("prompt_T", prompt_T, "int", 1)
        top_ids = _checked("scores.top_ids_P_K", scores.top_ids_P_K, "int", 2)
        # float32 only: the Python writer writes the value it is given, the C its float32
        top_lps = _checked("scores.top_logprobs_P_K", scores.top_logprobs_P_K, np.float32, 2)
        token_lp = _checked("scores.token_logprob_P", scores.token_logprob_P, np.float32, 1)
        positions, k = top_ids.shape
        if positions != max(len(prompt_T) - 1, 0):
            raise ValueError(
                f"positions_json: scores.top_ids_P_K has {positions} positions, prompt_T {len(prompt_T)} "
                "tokens (one position per token after the first)"
            )
        for name, array, shape in (
            ("scores.top_logprobs_P_K", top_lps, top_ids.shape),
            ("scores.token_logprob_P", token_lp, (positions,)),
        ):
            if array.shape != shape:
                raise ValueError(
                    f"positions_json: {name} has shape {array.shape}, scores.top_ids_P_K {top_ids.shape}"
                )
        out = np.empty(positions * ((k + 1) * _ENTRY_BYTES + 8) + 16, dtype=np.uint8)
        written = self._entries["write_positions"](
            prompt_T, len(prompt_T), top_ids, top_lps, token_lp, k, out, len(out)
        )
        if written == -2:
            return None
        if written < 0:
            raise AssertionError(f"write_positions: the buffer of {len(out)} bytes was too small")
        return out[:written].tobytes()

    def read(self, body: bytes | str, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores] | None:
        """``scores_from_completion`` of an answer the C reader takes and that holds what the rows
        need; None otherwise (the codec then reads it in Python, which says what is wrong)."""
        parsed = self.parse(body)
        return None if parsed is None else scores_from_parsed(self, parsed, rows, top_k)

    def select_top_k(
        self, parsed: ParsedAnswer, at_P: np.ndarray, token_P: np.ndarray, top_k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Top-K ids and log-probs ``[P, top_k]`` and the token's log-prob ``[P]`` at the parsed
        positions ``at_P`` where the tokens ``token_P`` are (``scores_from_parsed``); None where a
        position does not hold what the Python reader would read alike."""
        position = _checked("parsed.position_Q_2", parsed.position_Q_2, np.int64, 2)
        entry_id = _checked("parsed.entry_id_E", parsed.entry_id_E, np.int64, 1)
        entry_lp = _checked("parsed.entry_lp_E", parsed.entry_lp_E, np.float64, 1)
        entry_rank = _checked("parsed.entry_rank_E", parsed.entry_rank_E, np.int64, 1)
        at_P = _checked("at_P", at_P, "int", 1)
        token_P = _checked("token_P", token_P, "int", 1)
        entries = len(entry_id)
        if position.shape[1:] != (2,) or entry_lp.shape != (entries,) or entry_rank.shape != (entries,):
            raise ValueError(
                f"select_top_k: parsed.position_Q_2 {position.shape} (want [Q, 2]), entry_id_E {entry_id.shape}, "
                f"entry_lp_E {entry_lp.shape}, entry_rank_E {entry_rank.shape} (want one length)"
            )
        if token_P.shape != at_P.shape:
            raise ValueError(f"select_top_k: token_P has shape {token_P.shape}, at_P {at_P.shape}")
        top_k = operator.index(top_k)
        if top_k < 0:
            raise ValueError(f"select_top_k: top_k = {top_k}, not >= 0")
        if len(at_P) and (at_P.min() < 0 or at_P.max() >= len(position)):
            raise ValueError(
                f"select_top_k: at_P holds positions in [{at_P.min()}, {at_P.max()}], parsed.position_Q_2 {len(position)}"
            )
        first, count = position[at_P, 0], position[at_P, 1]
        if ((count >= 0) & ((first < 0) | (first + count > entries))).any() or (count < -1).any():
            raise ValueError(f"select_top_k: parsed.position_Q_2 names entries outside the {entries} parsed")
        n = len(at_P)
        top_ids = np.empty((n, top_k), dtype=np.int64)
        top_lps = np.empty((n, top_k), dtype=np.float32)
        token_lp = np.empty(n, dtype=np.float32)
        scratch = np.empty(4 * int(count.max(initial=0)) + 16, dtype=np.int64)  # select_top_k's
        failed = self._entries["select_top_k"](
            position,
            entry_id,
            entry_lp,
            entry_rank,
            at_P,
            token_P,
            n,
            top_k,
            top_ids,
            top_lps,
            token_lp,
            scratch,
        )
        return None if failed else (top_ids, top_lps, token_lp)

    def parse(self, body: bytes | str) -> ParsedAnswer | None:
        """The answer read into flat arrays, or None where the C reader does not take it (not JSON,
        or JSON it does not read as Python would: the codec then reads it in Python)."""
        if isinstance(body, str):
            body = body.encode()
        if not isinstance(body, bytes):
            raise TypeError(f"parse: body is {type(body).__name__}, not bytes or str")
        size = len(body)
        counts = np.zeros(4, dtype=np.int64)
        choice = np.empty((size // _MIN_CHOICE_BYTES + 1, 5), dtype=np.int64)
        position = np.empty((size // _MIN_POSITION_BYTES + 1, 2), dtype=np.int64)
        entries = size // _MIN_ENTRY_BYTES + 1
        entry_id = np.empty(entries, dtype=np.int64)
        entry_lp = np.empty(entries, dtype=np.float64)
        entry_rank = np.empty(entries, dtype=np.int64)
        token = np.empty(size // _MIN_TOKEN_BYTES + 1, dtype=np.int64)
        status = self._entries["parse_answer"](
            body,
            size,
            counts,
            choice,
            len(choice),
            position,
            len(position),
            entry_id,
            entry_lp,
            entry_rank,
            entries,
            token,
            len(token),
        )
        if status == _FULL:  # the capacities above are wrong: a bug here, not in the answer
            log.warning("parse_answer filled a buffer sized from the answer's %d bytes; read in Python", size)
        if status != 0:
            return None
        c, q, e, t = counts.tolist()
        return ParsedAnswer(choice[:c], position[:q], entry_id[:e], entry_lp[:e], entry_rank[:e], token[:t])


def _checked(name: str, array: np.ndarray, dtype: type | Literal["int"], ndim: int) -> np.ndarray:
    """``array`` as the C reads it (C-contiguous; ``dtype`` one type, or "int": any integer type an
    int64 holds, cast to it), or ValueError / TypeError naming the argument."""
    array = np.asarray(array)
    if array.ndim != ndim:
        raise ValueError(f"{name} has {array.ndim} dimension(s) {array.shape}, the codec's C reads {ndim}")
    if dtype == "int":
        if not (array.dtype.kind == "i" or (array.dtype.kind == "u" and array.dtype.itemsize < 8)):
            raise TypeError(f"{name} has dtype {array.dtype}, the codec's C reads integers (as int64)")
        return np.ascontiguousarray(array, dtype=np.int64)
    if array.dtype != dtype:
        raise TypeError(f"{name} has dtype {array.dtype}, the codec's C reads {np.dtype(dtype)}")
    return np.ascontiguousarray(array)


def scores_from_parsed(
    kernels: "CodecKernels", parsed: ParsedAnswer, rows: Sequence[ScoreRow], top_k: int
) -> list[RowScores] | None:
    """Our top-K rows from a parsed answer, as the Python reader builds them: per scored position the
    top ``top_k`` entries by log-prob (ties: lower id first), leaving out entries ranked below
    ``top_k``, and the log-prob of the token there. None where the answer does not fit the rows or
    holds anything the Python reader would refuse or read otherwise (duplicate ids, a position with
    too few entries, a log-prob that is not finite)."""
    choice = parsed.choice_C_5
    if len(choice) != len(rows) or not np.array_equal(np.sort(choice[:, 0]), np.arange(len(rows))):
        return None
    if not rows:
        return []
    at, tokens = [], []
    for row, (_, first_position, positions, first_token, sent_back) in zip(
        rows, choice[np.argsort(choice[:, 0])].tolist(), strict=True
    ):
        ids_T = row.token_ids_T
        if positions != len(ids_T):
            return None
        if sent_back >= 0 and not np.array_equal(
            parsed.token_T[first_token : first_token + sent_back], ids_T
        ):
            return None
        at.append(first_position + row.positions_P)
        tokens.append(ids_T[row.positions_P])
    selected = kernels.select_top_k(parsed, np.concatenate(at), np.concatenate(tokens), top_k)
    if selected is None:
        return None
    top_ids_P_K, top_lps_P_K, token_lp_P = selected
    entropy_P = topk_tail_entropies(top_lps_P_K).astype(np.float32)
    bounds = np.cumsum([0] + [len(r.positions_P) for r in rows]).tolist()
    return [
        RowScores(top_ids_P_K[s:e], top_lps_P_K[s:e], token_lp_P[s:e], entropy_P[s:e])
        for s, e in itertools.pairwise(bounds)
    ]


def disagreements(kernels: "CodecKernels") -> list[str]:
    """Where the library writes or reads a small answer otherwise than the Python codec (empty: it
    agrees). The answer has log-probs of every magnitude, tokens in and out of the top-K, a row with
    no scored position, and positions the rows do not read."""
    rng = np.random.default_rng(7)
    k = 4
    prompts = [rng.integers(0, 50, size=n).tolist() for n in (9, 2, 6)]
    scores = []
    for prompt in prompts:
        n = len(prompt) - 1
        top_ids = np.stack([rng.permutation(50)[:k] for _ in range(n)])
        top_ids[0, 1] = prompt[1]  # the token at the first position is in the top-K
        magnitudes = 10.0 ** rng.uniform(-9, 2.5, size=(n, k))
        top_lps = -np.sort(magnitudes, axis=1).astype(np.float32)
        top_lps[0, 0] = 0.0
        token_lp = top_lps[np.arange(n), -1] - np.float32(rng.uniform(0.5, 3.0))
        scores.append(RowScores(top_ids, top_lps, token_lp.astype(np.float32), np.zeros(n, np.float32)))
    failures = []
    python_body = completion_json(prompts, scores, "check")
    native_body = completion_json(prompts, scores, "check", kernels)
    cut = python_body.index(b'"choices"')  # the envelope's id and time differ
    if native_body[native_body.index(b'"choices"') :] != python_body[cut:]:
        failures.append("positions_json writes other text than the Python writer")
    rows = [ScoreRow(np.asarray(p, dtype=np.int64), np.arange(len(p) // 2, len(p))) for p in prompts]
    rows[1] = ScoreRow(rows[1].token_ids_T, np.arange(0))
    expected = python_scores_from_completion(python_body, rows, k)
    read = kernels.read(python_body, rows, k)
    if read is None:
        failures.append("read refused an answer the Python reader takes")
    else:
        for index, (ours, theirs) in enumerate(zip(read, expected, strict=True)):
            for field in ("top_ids_P_K", "top_logprobs_P_K", "token_logprob_P", "entropy_P"):
                if not np.array_equal(getattr(ours, field), getattr(theirs, field)):
                    failures.append(f"read gives another {field} for prompt {index}")
    if kernels.parse(python_body[:-1]) is not None:
        failures.append("parse took a truncated answer")
    return failures


def _bind(path: Path, lib: ctypes.CDLL) -> CodecKernels:
    native_abi.check_against_source(ENTRIES, CODEC_SOURCE.path.read_text(), CODEC_SOURCE.path.name)
    return CodecKernels(path, lib, native_abi.bind(lib, ENTRIES))


def load_codec_kernels(cache_root: Path) -> CodecKernels:
    """The codec's library for this machine, built under ``cache_root`` if need be, and checked
    against the Python codec; ``NativeBuildError`` says why it cannot be had."""
    path, lib = native_build.load(CODEC_SOURCE, cache_root)
    try:
        kernels = _bind(path, lib)
    except AttributeError as exc:  # a symbol missing from the library
        raise NativeBuildError(f"cannot load {path}: {exc}") from None
    failures = disagreements(kernels)
    if failures:
        raise NativeBuildError(f"{kernels.path.name} disagrees with the Python codec: {'; '.join(failures)}")
    return kernels


def codec_kernels(enabled: bool) -> CodecKernels | None:
    """The codec's kernels under the cache root where ``enabled`` (``[teacher] native_codec``) and
    they can be had; None otherwise."""
    if not enabled:
        return None
    found = available_codec_kernels(resolve_cache_dir())
    return None if isinstance(found, str) else found


@functools.cache
def available_codec_kernels(cache_root: Path) -> CodecKernels | str:
    """``load_codec_kernels`` once per process and cache root: the kernels, or why there are none
    (logged once as a warning; the codec then stays in Python)."""
    try:
        return load_codec_kernels(cache_root)
    except NativeBuildError as exc:
        log.warning(
            "the /v1/completions codec's compiled reader and writer are unavailable, Python's instead "
            "(slower): %s",
            exc,
        )
        return str(exc)
