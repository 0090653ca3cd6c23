#!/usr/bin/env bash
# The compiled kernels' tests (decode kernels, the /v1/completions codec, the build and its binding
# table) against libraries built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined,float-cast-overflow, every report fatal). Python is not built with
# ASan, so its runtime is preloaded and leak checking is off (the interpreter's own allocations
# would be reported). The sanitized builds are keyed apart from the plain ones in the cache.
#
#   bash scripts/test_sanitized.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
cc="${CC:-cc}"
asan="$("$cc" -print-file-name=libasan.so)"
if [[ ! -e "$asan" ]]; then
    echo "test_sanitized.sh: $cc has no AddressSanitizer runtime (libasan.so); install it (Debian: libasan8)" >&2
    exit 2
fi
export TURNOPD_NATIVE_SANITIZE="address,undefined,float-cast-overflow"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TURNOPD_CACHE_DIR="${TURNOPD_CACHE_DIR:-$(mktemp -d -t turnopd-sanitized-XXXXXX)}"
LD_PRELOAD="$asan" python -m pytest -q -n0 -p no:cacheprovider \
    tests/unit/rollout_worker/test_native_kernels.py \
    tests/unit/rollout_worker/test_native_kernels_properties.py \
    tests/unit/teacher_scorer/test_completions_native.py \
    tests/unit/test_native_build.py tests/unit/test_native_abi.py "$@"
