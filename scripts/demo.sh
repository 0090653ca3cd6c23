#!/usr/bin/env bash
# The main job on the embedded default. Until the training pipeline lands, it runs the paper's
# diagnostic replay of the depth controller and the loss-allocation diagnosis on the bundled
# (synthetic) example run in examples/ (regenerate with `python scripts/make_examples.py`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

bash scripts/setup.sh
echo "== turnopd controller replay examples/probes.jsonl --steps 60 --h-max 30 (first 12 steps)"
"$PY" -m services.cli controller replay examples/probes.jsonl --steps 60 --h-max 30 2>/dev/null | head -n 12
echo "== turnopd diagnose examples/vanilla_run"
"$PY" -m services.cli diagnose examples/vanilla_run
