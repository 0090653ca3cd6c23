"""Learner: top-K reverse KL, per-token turn weights (pure modules) and the FSDP trainer."""
