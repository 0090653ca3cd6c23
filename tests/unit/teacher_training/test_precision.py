"""The training compute dtype: auto follows the hardware's native bfloat16, the explicit values win."""

import pytest
import torch

from services.teacher_training.precision import native_bfloat16, uses_bfloat16

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "native"), [(False, False, False), (True, False, True), (False, True, True)]
)
def test_auto_takes_bfloat16_only_on_a_cpu_that_computes_it(monkeypatch, avx512_bf16, amx, native):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert native_bfloat16(CPU) is native
    assert uses_bfloat16("auto", CPU) is native
    assert uses_bfloat16("bfloat16", CPU) is True
    assert uses_bfloat16("off", CPU) is False


def test_a_device_of_another_kind_is_not_native():
    assert native_bfloat16(torch.device("meta")) is False
    assert uses_bfloat16("auto", torch.device("meta")) is False


def test_the_default_is_auto():
    from services.settings.sft import SFTSettings

    assert SFTSettings().autocast == "auto"
