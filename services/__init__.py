"""TurnOPD: turn-aware on-policy distillation for long-horizon LLM agents."""

__version__ = "0.1.0"
