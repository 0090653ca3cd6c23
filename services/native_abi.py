"""The boundary between Python and our compiled C entries, generated from one table per source.

Each C entry is declared once, as a ``Entry`` of ``Param``s written as the C prototype spells them,
each pointer with the number of elements the C reads or writes there (a Python expression over the
call's other arguments) and each entry with the conditions the C relies on. From that table:

* the ``ctypes`` argument and result types are set, so nothing beside the C keeps them by hand;
* the table is compared with the prototypes parsed from the C source when a library is bound, so a
  drift between them refuses the library (``NativeBuildError``) instead of corrupting memory;
* a checking function is generated per entry: every array argument must be of the pointer's
  element type (``float *``: float32, ``double *``: float64, ``int64_t *``: int64, ``char *``:
  uint8), contiguous, on the CPU, and hold at least the elements the C uses; a ``const char *``
  takes ``bytes`` of at least that length; every ``int`` and ``int64_t`` must fit its C type; every
  condition must hold. Anything else is a ``KernelArgumentError`` (a ``ValueError``) naming the
  entry, the argument and what it needed, raised before the C runs. The checks are generated as
  plain Python statements (no loop over the table per call), so a call costs about what a
  hand-written one does (``bench/kernel_boundary.py``).

An entry's arrays are torch tensors (``arrays="torch"``: the decode kernels) or numpy arrays
(``"numpy"``: the ``/v1/completions`` codec). A pointer declared ``nullable`` takes ``None`` (the C
reads NULL); one whose ``elements`` is None is sized by data the table cannot see, which its
wrapper checks.
"""

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from services.native_build import NativeBuildError

INT_RANGES = {"int": (-(2**31), 2**31 - 1), "int64_t": (-(2**63), 2**63 - 1)}

POINTER_DTYPES = {
    "float": "float32",
    "double": "float64",
    "int64_t": "int64",
    "uint8_t": "uint8",
    "char": "uint8",
    "int32_t": "int32",
}
SCALARS: dict[str, Any] = {
    "int": ctypes.c_int,
    "float": ctypes.c_float,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
}
RESULTS: dict[str, Any] = {"void": None, "int": ctypes.c_int, "int64_t": ctypes.c_int64}


class KernelArgumentError(ValueError):
    """A call to a compiled entry refused before the C ran: the message names the argument."""


@dataclass(frozen=True)
class Param:
    """One C parameter: its type as the prototype spells it (``const float *``, ``int``), its name,
    and for a pointer the elements the C touches (an expression over the other arguments)."""

    ctype: str
    name: str
    elements: str | None = None
    nullable: bool = False

    @property
    def pointee(self) -> str | None:
        """The element type of a pointer (``float``), None for a scalar."""
        if not self.ctype.endswith("*"):
            return None
        return self.ctype.removesuffix("*").strip().removeprefix("const ").strip()


@dataclass(frozen=True)
class Entry:
    """One C function: its result type, its parameters in order, and the conditions it needs
    (Python expressions over the arguments, each reported as written when it fails)."""

    name: str
    returns: str
    params: tuple[Param, ...]
    requires: tuple[str, ...] = field(default=())
    arrays: Literal["torch", "numpy"] = "torch"

    def prototype(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.returns, tuple((p.ctype, p.name) for p in self.params)


_PROTOTYPE = re.compile(r"^(?:static\s+)?(void|int|int64_t)\s+(\w+)\s*\(([^)]*)\)\s*\{", re.MULTILINE)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def parse_prototypes(source: str) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """The non-static functions a C source defines: name -> (result type, ((type, name), ...)),
    types normalised to ``const float *`` form."""
    found = {}
    for match in _PROTOTYPE.finditer(_COMMENT.sub(" ", source)):
        if match.group(0).startswith("static"):
            continue
        params = []
        for raw in match.group(3).split(","):
            words = raw.replace("*", " * ").split()
            params.append((" ".join(words[:-1]), words[-1]))
        found[match.group(2)] = (match.group(1), tuple(params))
    return found


def _normal(ctype: str) -> str:
    """``const float*`` and ``const  float *`` alike -> ``const float *``."""
    return " ".join(ctype.replace("*", " * ").split())


def check_against_source(entries: tuple[Entry, ...], source: str, source_name: str) -> None:
    """``NativeBuildError`` where the table and the C source's prototypes differ."""
    parsed = parse_prototypes(source)
    for entry in entries:
        if entry.name not in parsed:
            raise NativeBuildError(f"{source_name} defines no {entry.name}, which the binding table declares")
        want = (entry.returns, tuple((_normal(t), n) for t, n in entry.prototype()[1]))
        if parsed[entry.name] != want:
            raise NativeBuildError(
                f"{source_name}'s {entry.name} is {_render(entry.name, parsed[entry.name])}, but the "
                f"binding table declares {_render(entry.name, want)}"
            )


def _render(name: str, prototype: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    returns, params = prototype
    return f"{returns} {name}({', '.join(f'{t} {n}'.replace('* ', '*') for t, n in params)})"


def bind(lib: ctypes.CDLL, entries: tuple[Entry, ...]) -> dict[str, Callable[..., Any]]:
    """Each entry of ``lib`` with its ctypes types set, behind its generated checking function
    (called with the C's arguments in order, tensors where the C takes pointers)."""
    bound = {}
    for entry in entries:
        function = getattr(lib, entry.name)  # AttributeError: a symbol missing from the library
        function.argtypes = [_argtype(p) for p in entry.params]
        function.restype = RESULTS[entry.returns]
        bound[entry.name] = _checked(entry, function)
    return bound


def _argtype(param: Param) -> Any:
    if param.ctype == "const char *":
        return ctypes.c_char_p  # bytes, passed as they are
    return ctypes.c_void_p if param.pointee else SCALARS[param.ctype]


# Per array kind: (the test that an argument is refused, its length, its address), as code over `{n}`.
_ARRAY_CODE = {
    "torch": (
        "not isinstance({n}, _Array) or {n}.dtype is not {dtype} or not {n}.is_cpu or not {n}.is_contiguous()",
        "{n}.numel()",
        "{n}.data_ptr()",
    ),
    "numpy": (
        "not isinstance({n}, _Array) or {n}.dtype != {dtype} or not {n}.flags.c_contiguous",
        "{n}.size",
        "{n}.ctypes.data",
    ),
    "bytes": ("type({n}) is not bytes", "len({n})", "{n}"),
}


def _checked(entry: Entry, function: Callable[..., Any]) -> Callable[..., Any]:
    """Generates ``def <entry>(<params>)`` that checks every argument, then calls ``function``."""
    names = [p.name for p in entry.params]
    lines = [f"def {entry.name}({', '.join(names)}):"]
    for index, param in enumerate(entry.params):  # the ints first: the sizes are computed from them
        if param.ctype in INT_RANGES:
            low, high = INT_RANGES[param.ctype]
            lines.append(f"    if type({param.name}) is not int or not {low} <= {param.name} <= {high}:")
            lines.append(f"        _bad_int({index}, {param.name})")
    passed = []
    for index, param in enumerate(entry.params):
        name = param.name
        if param.pointee is None:
            passed.append(name)
            continue
        kind = "bytes" if param.ctype == "const char *" else entry.arrays
        refused, length, address = (
            code.format(n=name, dtype=f"_{POINTER_DTYPES[param.pointee]}") for code in _ARRAY_CODE[kind]
        )
        indent = "    "
        if param.nullable:
            lines.append(f"    if {name} is not None:")
            indent = "        "
        lines.append(f"{indent}if {refused}: _bad_array({index}, {name})")
        if param.elements is not None:
            lines.append(f"{indent}if {length} < {param.elements}: _short({index}, {length}, locals())")
        passed.append(f"None if {name} is None else {address}" if param.nullable else address)
    for index, condition in enumerate(entry.requires):
        lines.append(f"    if not ({condition}): _unmet({index}, locals())")
    lines.append(f"    return _function({', '.join(passed)})")

    def bad_int(index: int, value: object) -> None:
        param = entry.params[index]
        raise KernelArgumentError(
            f"{entry.name}: {param.name} must be an int that fits a C {param.ctype}, not {value!r}"
        )

    def bad_array(index: int, value: object) -> None:
        param = entry.params[index]
        raise KernelArgumentError(
            f"{entry.name}: {param.name} must be {_wanted(entry, param)}, not {_described(value)}"
        )

    def short(index: int, length: int, arguments: dict[str, Any]) -> None:
        param = entry.params[index]
        needed = eval(param.elements or "0", {}, dict(arguments))
        raise KernelArgumentError(
            f"{entry.name}: {param.name} holds {length} elements, the call uses {param.elements} = {needed}"
        )

    def unmet(index: int, arguments: dict[str, Any]) -> None:
        shown = ", ".join(f"{p.name}={arguments[p.name]}" for p in entry.params if p.pointee is None)
        raise KernelArgumentError(f"{entry.name}: needs {entry.requires[index]} ({shown})")

    array_type: Any
    if entry.arrays == "torch":
        import torch

        array_type = torch.Tensor
        dtypes = {f"_{d}": getattr(torch, d) for d in POINTER_DTYPES.values()}
    else:
        import numpy

        array_type = numpy.ndarray
        dtypes = {f"_{d}": numpy.dtype(d) for d in POINTER_DTYPES.values()}
    scope: dict[str, Any] = {
        "_Array": array_type,
        "_function": function,
        "_bad_int": bad_int,
        "_bad_array": bad_array,
        "_short": short,
        "_unmet": unmet,
        **dtypes,
    }
    exec(compile("\n".join(lines), f"<binding of {entry.name}>", "exec"), scope)
    return scope[entry.name]


def _wanted(entry: Entry, param: Param) -> str:
    if param.ctype == "const char *":
        return "bytes"
    dtype = POINTER_DTYPES[param.pointee or ""]
    if entry.arrays == "torch":
        return f"a contiguous CPU torch.{dtype} tensor"
    return f"a C-contiguous numpy {dtype} array"


def _described(value: object) -> str:
    """What an argument is, in the words of ``_wanted``."""
    if value is None:
        return "None"
    kind = f"{type(value).__module__}.{type(value).__name__}"
    if kind in ("torch.Tensor", "torch.nn.parameter.Parameter"):
        tensor: Any = value
        return f"{tensor.dtype} on {tensor.device}" + ("" if tensor.is_contiguous() else ", not contiguous")
    if kind == "numpy.ndarray":
        array: Any = value
        return f"a numpy {array.dtype} array" + ("" if array.flags.c_contiguous else ", not C-contiguous")
    return type(value).__name__
