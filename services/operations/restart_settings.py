"""Which settings a restarted service takes from a new config, the config hash `turnopd status` shows,
and the rule that a failed restart brings the service back as it was.

A restarted service takes only its own sections from the new file; everything that defines the
run (method, steps, schedule, loss, the student model) stays as the run started, so a restart can
change how a service runs but never what the run computes. The env gateway is its own process
and reads the whole file itself.
"""

import hashlib
import re
from collections.abc import Callable
from typing import Any

from services.errors import InputError
from services.settings.tree import TurnOPDSettings

# A failed restart is reported to the operator, never allowed to stop the run: whatever starting
# the new process raised (Ray, the OS, a bad config, a bug in the service) is caught. Only a
# broken invariant (ResumeMismatchError) stops the run.
RESTART_ERRORS = (Exception,)

_WORKER = re.compile(r"^rollout-worker-(0|[1-9][0-9]*)$")

# Sections a restarted service takes from a new config file.
SECTIONS: dict[str, tuple[str, ...]] = {
    "rollout-worker": ("models", "rollout_worker"),
    "teacher": ("teacher",),
    "env-gateway": ("env_gateway",),
    "controller": ("controller",),
    "learner": ("learner",),
    "redis": (),
}
# Fields of those sections that identify the run and never change on a restart.
PINNED: dict[str, tuple[str, ...]] = {
    "models": (
        "student",
        "teacher",
        "cache_dir",
        "seed",
        "vocab_size",
        "entity_max_number",
        "entity_embeddings",
    ),
    "controller": ("redis_url", "redis_password", "embedded_redis_dir"),
}


def service_kind(service: str) -> str:
    """``rollout-worker`` for ``rollout-worker-{i}`` and ``rollout-pool``, else the name itself."""
    if _WORKER.match(service) or service == "rollout-pool":
        return "rollout-worker"
    if service not in SECTIONS:
        raise InputError(f"unknown service {service!r}")
    return service


def worker_index(service: str) -> int | None:
    """``i`` of ``rollout-worker-{i}``, None for any other service."""
    match = _WORKER.match(service)
    return int(match.group(1)) if match else None


def restart_settings(run: TurnOPDSettings, new: TurnOPDSettings, service: str) -> TurnOPDSettings:
    """The run's settings with ``service``'s own sections taken from ``new`` (pinned fields kept)."""
    update: dict[str, Any] = {}
    for name in SECTIONS[service_kind(service)]:
        values = getattr(new, name).model_dump()
        for field in PINNED.get(name, ()):
            values[field] = getattr(getattr(run, name), field)
        update[name] = type(getattr(run, name)).model_validate(values)
    return run.model_copy(update=update)


def config_hash(settings: TurnOPDSettings, service: str) -> str:
    """Eight hex digits identifying the configuration ``service`` runs with."""
    sections = SECTIONS[service_kind(service)]
    text = "|".join(getattr(settings, name).model_dump_json() for name in sections)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def start_or_restore(
    start: Callable[[TurnOPDSettings], None], new: TurnOPDSettings | None, old: TurnOPDSettings
) -> TurnOPDSettings:
    """Start a service's new process with ``new`` settings (None: the ``old`` ones it had) and return
    the settings it runs with; if that fails with new settings, start it again with the old ones and
    re-raise, so the service is back as it was and the failure is reported."""
    try:
        start(new if new is not None else old)
    except RESTART_ERRORS:
        if new is None:
            raise
        start(old)
        raise
    return new if new is not None else old
