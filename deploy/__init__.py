"""Deployment assets of TurnOPD (manifests, cluster configs) and their offline checks."""
