"""Offline checks of the deployment: render the kustomize overlays, validate every manifest and
`ray up` config against its schema, and compare the requested resources with the run config.

Run them all with ``python -m deploy.checks`` from the repository root.
"""
