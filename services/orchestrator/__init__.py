"""Orchestrator: the driver of `turnopd train` (the step pipeline)."""
