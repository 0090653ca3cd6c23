"""Rules every restart keeps: which service a name means, and that a failed restart brings the
service back as it was.

What a restarted service takes from a new config is its own settings type's business
(``services.settings.per_service``: ``RESTARTABLE`` sections, each keeping its run-defining fields).
"""

import re
from collections.abc import Callable
from typing import TypeVar

from services.contracts.operations import check_service_name
from services.errors import InputError

# A failed restart is reported to the operator, never allowed to stop the run: whatever starting
# the new process raised (Ray, the OS, a bad config, a bug in the service) is caught. Only a
# broken run (``managed_service.RunBrokenError``: a learner that resumed elsewhere, or none at all) stops it.
RESTART_ERRORS = (Exception,)

_WORKER = re.compile(r"^rollout-worker-(0|[1-9][0-9]*)$")

T = TypeVar("T")


def service_kind(service: str) -> str:
    """``rollout-worker`` for ``rollout-worker-{i}`` and ``rollout-pool``, else the name itself."""
    if _WORKER.match(service) or service == "rollout-pool":
        return "rollout-worker"
    try:
        return check_service_name(service)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def worker_index(service: str) -> int | None:
    """``i`` of ``rollout-worker-{i}``, None for any other service."""
    match = _WORKER.match(service)
    return int(match.group(1)) if match else None


def start_or_restore(start: Callable[[T], None], new: T | None, old: T) -> T:
    """Start a service's new process with ``new`` settings (None: the ``old`` ones it had) and return
    the settings it runs with. If that fails, start it once more with the old ones and re-raise the
    failure, so the service is back as it was and the failure is reported: a replacement stops the
    old process first, so even a failed restart without new settings needs a fresh one. Should that
    start fail too, its error is raised (with the first as its cause)."""
    try:
        start(new if new is not None else old)
    except RESTART_ERRORS:
        start(old)
        raise
    return new if new is not None else old
