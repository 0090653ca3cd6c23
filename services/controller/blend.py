"""The progressive loss-blend controller (paper Sec. 5.2): alpha from normalised training progress."""

from services.errors import InputError


def blend_alpha(step: int, total_steps: int, start: float, end: float) -> float:
    """alpha_k = clip((k/K - s) / (e - s), 0, 1)."""
    if total_steps < 1:
        raise InputError(f"total_steps must be >= 1, got {total_steps}")
    if end <= start:
        raise InputError(f"blend end ({end}) must be greater than start ({start})")
    progress = step / total_steps
    return min(max((progress - start) / (end - start), 0.0), 1.0)
