"""The codec's compiled reader fuzzed against the Python reader, built under AddressSanitizer and
UBSan: many more examples than the suite's property tests (tests/unit/teacher_scorer/
test_codec_properties.py), new ones each run, plus the hostile answers at full size. Prints how many
answers each strategy drew, how many the C read (the rest it left to Python), and the time.

    python bench/codec_fuzz.py [--examples 20000] [--no-sanitize]

The sanitized build is ``native_build``'s ``TURNOPD_NATIVE_SANITIZE=address,undefined,float-cast-overflow`` (keyed
apart from the plain library); the script sets it, preloads the compiler's libasan and runs itself
again. Any out-of-bounds access, use of uninitialised memory or undefined behaviour in the C stops
the run with the sanitizer's report; a disagreement stops it with hypothesis' smallest example.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from services import native_build  # noqa: E402

SANITIZERS = "address,undefined,float-cast-overflow"  # as scripts/test_sanitized.sh
ASAN_OPTIONS = "detect_leaks=0:abort_on_error=1:halt_on_error=1"
UBSAN_OPTIONS = "halt_on_error=1:print_stacktrace=1"


def rerun_sanitized() -> None:
    """Run this script again with the sanitized build asked for and libasan loaded first."""
    env_name = getattr(native_build, "SANITIZE_ENV", None)
    if env_name is None:
        sys.exit("services/native_build.py has no sanitizer switch (TURNOPD_NATIVE_SANITIZE) yet")
    cc = native_build.compiler()
    if cc is None:
        sys.exit("no C compiler: nothing to fuzz")
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not Path(asan).is_file():
        sys.exit(f"{cc} has no libasan.so ({asan!r}): install its sanitizer runtime, or pass --no-sanitize")
    env = os.environ | {
        env_name: SANITIZERS,
        "LD_PRELOAD": asan,
        "ASAN_OPTIONS": ASAN_OPTIONS,
        "UBSAN_OPTIONS": UBSAN_OPTIONS,
    }
    os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:], "--sanitized"], env)


def fuzz(name: str, strategy: st.SearchStrategy, check, examples: int) -> None:
    """``check`` on ``examples`` draws of ``strategy``; prints the draws and the C's reads."""
    read = []

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(drawn) -> None:
        read.append(check(drawn))

    start = time.perf_counter()
    run()
    print(
        f"{name:28s}: {len(read):6d} answers, {sum(read):6d} read by the C, {time.perf_counter() - start:6.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20000, help="answers per strategy")
    parser.add_argument("--no-sanitize", action="store_true", help="fuzz the plain build")
    parser.add_argument("--sanitized", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.no_sanitize and not args.sanitized:
        rerun_sanitized()

    from codec_answers import (
        Answer,
        answers,
        arbitrary_bodies,
        assert_readers_agree,
        hostile_answers,
        mutated,
    )

    from services.teacher_scorer.completions_native import load_codec_kernels

    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
    kernels = load_codec_kernels(Path(tempfile.mkdtemp(prefix="codec-fuzz-")))
    sanitized = b"__asan" in kernels.path.read_bytes() and b"__ubsan" in kernels.path.read_bytes()
    print(
        f"library {kernels.path.name}: {'built with -fsanitize=' + SANITIZERS if sanitized else 'not sanitized'}"
    )
    if args.sanitized and not sanitized:
        sys.exit("the library was not built with the sanitizers: is TURNOPD_NATIVE_SANITIZE honoured?")

    def agree(answer: Answer) -> bool:
        return assert_readers_agree(kernels, answer)

    def each_body(drawn: tuple[list[bytes], Answer]) -> bool:
        bodies, answer = drawn
        return any([agree(Answer(body, answer.rows, answer.top_k)) for body in bodies])

    fuzz("answers of every shape", answers(), agree, args.examples)
    fuzz("broken byte by byte", answers().flatmap(mutated), agree, args.examples)
    fuzz("arbitrary bytes and runs", arbitrary_bodies(), each_body, args.examples)
    for name, answer in hostile_answers().items():
        start = time.perf_counter()
        read = agree(answer)
        print(
            f"hostile: {name:22s}: {'read by the C' if read else 'left to Python'}, {time.perf_counter() - start:.2f} s"
        )
    print("no disagreement" + (" and no sanitizer report" if sanitized else ""))


if __name__ == "__main__":
    main()
