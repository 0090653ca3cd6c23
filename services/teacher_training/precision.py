"""The training compute dtype: bfloat16 autocast only where the hardware computes it natively.

On a CPU without AVX512-BF16 or AMX, torch emulates bfloat16 matrix products: on a 2-core AMD
EPYC (AVX2 only) an SFT pass of the tiny teacher ran 13.5x slower under bfloat16 autocast than in
float32 (``bench/sft_autocast.py``), and a step of the joint recipe took 15 s against about 1 s. ``auto`` (the default) picks bfloat16 on CUDA devices that support it and on
CPUs with either instruction set, float32 elsewhere.
"""

from typing import TYPE_CHECKING

from services.settings.sft import Autocast

if TYPE_CHECKING:
    import torch


def native_bfloat16(device: "torch.device") -> bool:
    """Whether ``device`` computes bfloat16 matrix products in hardware."""
    import torch

    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":  # torch's own probes (private: a torch without them counts as no)
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)
    return False


def uses_bfloat16(autocast: Autocast, device: "torch.device") -> bool:
    """The setting resolved for ``device``: ``auto`` follows the hardware."""
    if autocast == "auto":
        return native_bfloat16(device)
    return autocast == "bfloat16"
