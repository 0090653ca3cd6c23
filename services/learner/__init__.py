"""Learner: top-K reverse KL (a pure module) and the FSDP trainer."""
