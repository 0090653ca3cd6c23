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
echo "== mypy (services/)"
"$PY" -m mypy
echo "== pytest"
# Two xdist workers, each with a Ray cluster of its own: one plays the training runs in turn, the
# other everything else (tests/conftest.py: the count, none for
# `-m "not integration"`; TURNOPD_TEST_WORKERS overrides it). The 60 slowest tests and fixtures close
# the run: where the suite's time goes (issue 36, docs/development.md).
"$PY" -m pytest -n auto --dist loadgroup --durations=60 "$@"
