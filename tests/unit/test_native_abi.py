"""The generated boundary of our C entries: the table is checked against the C source's prototypes,
and every call's tensors and ints against what the C relies on, before it runs."""

from pathlib import Path

import pytest
import torch

from services import native_abi
from services.native_abi import Entry, KernelArgumentError, Param
from services.native_build import NativeBuildError, NativeSource, load

SOURCE = """
/* scale rows: y[i] = x[i] * factor, for n floats; returns how many were negative */
static inline float twice(float v) { return 2.0f * v; }
int scale_rows(const float *x, int n,
               float factor, float *y /* n floats */, const int64_t* mask) {
    int negative = 0;
    for (int i = 0; i < n; i++) {
        y[i] = (mask && mask[i]) ? 0.0f : x[i] * factor;
        negative += x[i] < 0;
    }
    return negative;
}
"""
ENTRY = Entry(
    "scale_rows",
    "int",
    (
        Param("const float *", "x", "n"),
        Param("int", "n"),
        Param("float", "factor"),
        Param("float *", "y", "n"),
        Param("const int64_t *", "mask", "n", nullable=True),
    ),
    requires=("n >= 0",),
)


@pytest.fixture(scope="module")
def scale_rows(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("abi")
    (root / "scale.c").write_text("#include <stdint.h>\n" + SOURCE)
    _, lib = load(NativeSource(root / "scale.c", "scale", ("-O2", "-fPIC", "-shared")), root / "cache")
    return native_abi.bind(lib, (ENTRY,))["scale_rows"]


def test_prototypes_are_parsed_as_written_whatever_the_spacing_and_comments():
    assert native_abi.parse_prototypes(SOURCE) == {
        "scale_rows": (
            "int",
            (
                ("const float *", "x"),
                ("int", "n"),
                ("float", "factor"),
                ("float *", "y"),
                ("const int64_t *", "mask"),
            ),
        )
    }  # the static helper is not an entry


def test_a_table_that_drifted_from_the_c_source_is_refused_naming_both():
    drifted = Entry("scale_rows", "int", (*ENTRY.params[:2], Param("int", "factor"), *ENTRY.params[3:]))
    with pytest.raises(
        NativeBuildError,
        match=r"scale.c's scale_rows is int scale_rows\(const float \*x, int n, float factor, .*but the binding "
        r"table declares int scale_rows\(const float \*x, int n, int factor,",
    ):
        native_abi.check_against_source((drifted,), SOURCE, "scale.c")
    with pytest.raises(NativeBuildError, match=r"scale\.c defines no scale_columns"):
        native_abi.check_against_source((Entry("scale_columns", "int", ()),), SOURCE, "scale.c")
    native_abi.check_against_source((ENTRY,), SOURCE, "scale.c")  # the right table passes


def test_the_shipped_tables_match_their_c_sources():
    from services.rollout_worker.engines import native_kernels
    from services.teacher_scorer import completions_native

    native_abi.check_against_source(
        native_kernels.ENTRIES, native_kernels.SOURCE.read_text(), native_kernels.SOURCE.name
    )
    codec = completions_native.CODEC_SOURCE.path
    native_abi.check_against_source(completions_native.ENTRIES, codec.read_text(), codec.name)
    assert {e.name for e in completions_native.ENTRIES} == set(native_abi.parse_prototypes(codec.read_text()))


SUM_SOURCE = """
#include <stdint.h>
int64_t sum_bytes(const char *body, int64_t length, double *out) {
    int64_t total = 0;
    for (int64_t i = 0; i < length; i++) total += (unsigned char)body[i];
    out[0] = (double)total;
    return total;
}
"""
SUM_ENTRY = Entry(
    "sum_bytes",
    "int64_t",
    (Param("const char *", "body", "length"), Param("int64_t", "length"), Param("double *", "out", "1")),
    arrays="numpy",
)


def test_an_entry_over_numpy_arrays_and_bytes_is_checked_alike(tmp_path: Path):
    import numpy as np

    source = tmp_path / "sum.c"
    source.write_text(SUM_SOURCE)
    _, lib = load(NativeSource(source, "sum", ("-O2", "-fPIC", "-shared")), tmp_path / "cache")
    sum_bytes = native_abi.bind(lib, (SUM_ENTRY,))["sum_bytes"]
    out = np.zeros(1)
    assert sum_bytes(b"\x01\x02\xff", 3, out) == 258 and out[0] == 258.0
    refusals = [
        ((b"ab", 3, out), r"sum_bytes: body holds 2 elements, the call uses length = 3"),
        (("ab", 2, out), r"sum_bytes: body must be bytes, not str"),
        (
            (b"ab", 2, np.zeros(1, dtype=np.float32)),
            r"out must be a C-contiguous numpy float64 array, not a numpy float32 array",
        ),
        ((b"ab", 2, np.zeros((2, 2))[:, 0]), r"out must be .*, not a numpy float64 array, not C-contiguous"),
        ((b"ab", 2, torch.zeros(1, dtype=torch.float64)), r"out must be .*, not torch.float64 on cpu"),
        ((b"ab", 2**63, out), r"length must be an int that fits a C int64_t, not 9223372036854775808"),
        ((b"ab", 2, np.zeros(0)), r"out holds 0 elements, the call uses 1 = 1"),
    ]
    for arguments, complaint in refusals:
        with pytest.raises(KernelArgumentError, match=complaint):
            sum_bytes(*arguments)


def test_a_checked_call_runs_the_c_with_the_tensors_memory(scale_rows):
    x, y = torch.tensor([1.0, -2.0, 3.0, -4.0]), torch.zeros(4)
    assert scale_rows(x, 4, 0.5, y, None) == 2
    assert y.tolist() == [0.5, -1.0, 1.5, -2.0]
    assert scale_rows(x, 4, 1.0, y, torch.tensor([0, 1, 0, 1])) == 2 and y.tolist() == [1.0, 0.0, 3.0, 0.0]


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (
            (torch.ones(3), 4, 1.0, torch.zeros(4), None),
            r"scale_rows: x holds 3 elements, the call uses n = 4",
        ),
        (
            (torch.ones(4), 4, 1.0, torch.zeros(2), None),
            r"scale_rows: y holds 2 elements, the call uses n = 4",
        ),
        (
            (torch.ones(4, dtype=torch.float64), 4, 1.0, torch.zeros(4), None),
            r"x must be a contiguous CPU torch.float32 tensor, not torch.float64 on cpu",
        ),
        (
            (torch.ones(4), 4, 1.0, torch.zeros(4), torch.zeros(4, dtype=torch.int32)),
            r"mask must be a contiguous CPU torch.int64 tensor, not torch.int32",
        ),
        (
            (torch.ones(4, 2)[:, 0], 4, 1.0, torch.zeros(4), None),
            r"x must be .*, not torch.float32 on cpu, not contiguous",
        ),
        (
            (torch.ones(4, device="meta"), 4, 1.0, torch.zeros(4), None),
            r"x must be .*, not torch.float32 on meta",
        ),
        ((None, 4, 1.0, torch.zeros(4), None), r"x must be a contiguous CPU torch.float32 tensor, not None"),
        ((torch.ones(4).numpy(), 4, 1.0, torch.zeros(4), None), r"x must be .*, not a numpy float32 array"),
        (
            (torch.ones(4), 2**31, 1.0, torch.zeros(4), None),
            r"n must be an int that fits a C int, not 2147483648",
        ),
        ((torch.ones(4), 4.0, 1.0, torch.zeros(4), None), r"n must be an int that fits a C int, not 4.0"),
        ((torch.ones(4), -1, 1.0, torch.zeros(4), None), r"scale_rows: needs n >= 0 \(n=-1, factor=1.0\)"),
    ],
)
def test_every_argument_the_c_relies_on_is_refused_before_it_runs(scale_rows, arguments, complaint):
    with pytest.raises(KernelArgumentError, match=complaint):
        scale_rows(*arguments)
    output = arguments[3]
    assert not output.any()  # the C never ran


def test_a_tensor_longer_than_needed_is_taken(scale_rows):
    y = torch.zeros(6)
    assert scale_rows(torch.ones(8), 4, 3.0, y, None) == 0 and y.tolist() == [3.0] * 4 + [0.0] * 2


def test_the_sizes_cite_their_expression(tmp_path: Path):
    entry = Entry(
        "f",
        "void",
        (Param("float *", "a", "rows * (2 if wide else 1)"), Param("int", "rows"), Param("int", "wide")),
    )
    source = tmp_path / "f.c"
    source.write_text(
        "void f(float *a, int rows, int wide) { for (int i = 0; i < rows * (wide ? 2 : 1); i++) a[i] = 1; }\n"
    )
    _, lib = load(NativeSource(source, "f", ("-O2", "-fPIC", "-shared")), tmp_path / "cache")
    f = native_abi.bind(lib, (entry,))["f"]
    with pytest.raises(
        KernelArgumentError, match=r"f: a holds 5 elements, the call uses rows \* \(2 if wide else 1\) = 6"
    ):
        f(torch.zeros(5), 3, 1)
    a = torch.zeros(6)
    f(a, 3, 1)
    assert a.tolist() == [1.0] * 6
