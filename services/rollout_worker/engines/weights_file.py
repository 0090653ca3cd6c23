"""Weights published to a rollout engine: the one fit check both engines run, and the safetensors
file that carries them into vLLM's worker processes.

Every rollout engine receives the learner's weights the same way, a full state dict in Hugging
Face names (``GenerationEngine.load_weights``), and checks it with ``check_weights_fit`` before it
touches its own weights, so a state dict that does not fit leaves the engine as it was. The vLLM
engine then writes the dict to a file on its node (``write_weights``: /dev/shm when it has room)
and sends only the path (``WeightsUpdate``) across vLLM's process boundary; its GPU workers read
the file back lazily (``read_weights``).
"""

import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from services.contracts.weights import WeightsUpdate
from services.errors import ConfigError, InputError

if TYPE_CHECKING:
    import torch

Shapes = Mapping[str, tuple[int, ...]]

SHARED_MEMORY = Path("/dev/shm")
_HEADROOM_BYTES = 64 << 20  # left free beside the file


def shapes_of(state_dict: Mapping[str, "torch.Tensor"]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(d) for d in tensor.shape) for name, tensor in state_dict.items()}


def check_weights_fit(offered: Shapes, expected: Shapes, optional: Collection[str] = ()) -> None:
    """InputError unless ``offered`` replaces every tensor of ``expected`` with one of its shape.

    ``optional`` names may be absent on either side (a tied ``lm_head.weight``, which is the input
    embedding).
    """
    optional = set(optional)
    missing = sorted(set(expected) - set(offered) - optional)
    unexpected = sorted(set(offered) - set(expected) - optional)
    reshaped = sorted(
        f"{name} {list(offered[name])} != {list(expected[name])}"
        for name in set(offered) & set(expected)
        if tuple(offered[name]) != tuple(expected[name])
    )
    if missing or unexpected or reshaped:
        raise InputError(
            f"weights do not fit the model, nothing was loaded: {len(missing)} missing {missing[:5]}, "
            f"{len(unexpected)} unexpected {unexpected[:5]}, {len(reshaped)} of another shape {reshaped[:3]}"
        )


def checkpoint_shapes(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the tensors in a Hugging Face checkpoint's safetensors files (headers only)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"no *.safetensors weights in {model_dir}")
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (a safetensors handle is not a dict)
                shapes[name] = tuple(int(d) for d in handle.get_slice(name).get_shape())
    return shapes


def staging_dir(needed_bytes: int, candidates: Collection[Path] = (SHARED_MEMORY,)) -> Path:
    """The first of ``candidates`` (default /dev/shm: memory, no disk), then the temp directory,
    with room for a file of ``needed_bytes``."""
    for directory in [*candidates, Path(tempfile.gettempdir())]:
        if not (directory.is_dir() and os.access(directory, os.W_OK)):
            continue
        if shutil.disk_usage(directory).free >= needed_bytes + _HEADROOM_BYTES:
            return directory
    raise ConfigError(
        f"no room for {needed_bytes / 2**30:.1f} GiB of weights in /dev/shm or {tempfile.gettempdir()}; "
        "enlarge /dev/shm or point TMPDIR at a directory with room"
    )


def write_weights(
    state_dict: Mapping[str, "torch.Tensor"],
    directory: Path,
    version: int,
    dtype: "torch.dtype | None" = None,
) -> WeightsUpdate:
    """Write ``state_dict`` (floating tensors cast to ``dtype``) to a new safetensors file in
    ``directory``; the file appears under its final name only once complete."""
    from safetensors.torch import save_file

    tensors = {
        name: (
            t.detach().to("cpu", dtype) if dtype is not None and t.is_floating_point() else t.detach().cpu()
        ).contiguous()
        for name, t in state_dict.items()
    }
    handle, partial = tempfile.mkstemp(
        prefix=f"turnopd-weights-v{version}-", suffix=".safetensors.part", dir=directory
    )
    os.close(handle)
    try:
        save_file(tensors, partial, metadata={"turnopd_version": str(version)})
        final = partial.removesuffix(".part")
        os.replace(partial, final)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return WeightsUpdate(path=str(Path(final).resolve()), version=version)


def read_weights(path: str) -> Iterator[tuple[str, "torch.Tensor"]]:
    """The ``(name, tensor)`` pairs of a safetensors file, one tensor in memory at a time."""
    from safetensors import safe_open

    with safe_open(path, framework="pt", device="cpu") as handle:
        for name in handle.keys():  # noqa: SIM118 (a safetensors handle is not a dict)
            yield name, handle.get_tensor(name)
