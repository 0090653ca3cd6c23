"""Rollout workers: named Ray actors playing multi-turn episodes with a generation engine."""
