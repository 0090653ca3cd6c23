"""Typed messages for every process boundary (one module per boundary)."""
