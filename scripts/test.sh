#!/usr/bin/env bash
# The whole test suite: setup, lint, type check, unit + integration tests.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m "not integration"`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

bash scripts/setup.sh --with-prometheus
echo "== ruff"
"$PY" -m ruff check services tests bench scripts deploy
"$PY" -m ruff format --check services tests bench scripts deploy
# mypy (about 40 CPU-seconds, one core) runs beside pytest at a lower priority, in the CPU time the
# tests leave idle; its report follows pytest's, and either failing fails the script.
mypy_log=$(mktemp)
nice -n 10 "$PY" -m mypy >"$mypy_log" 2>&1 &
mypy_pid=$!
trap 'kill "$mypy_pid" 2>/dev/null || true; rm -f "$mypy_log"' EXIT
echo "== pytest (mypy beside it)"
# Two xdist workers, each with a Ray cluster of its own: one plays the training runs in turn, the
# other everything else (tests/conftest.py: the count, none for
# `-m "not integration"`; TURNOPD_TEST_WORKERS overrides it). The 60 slowest tests and fixtures close
# the run: where the suite's time goes (issue 36, docs/development.md).
pytest_rc=0
"$PY" -m pytest -n auto --dist loadgroup --durations=60 "$@" || pytest_rc=$?
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
echo "== mypy (services/)"
cat "$mypy_log"
if [ "$pytest_rc" -ne 0 ]; then exit "$pytest_rc"; fi
exit "$mypy_rc"
