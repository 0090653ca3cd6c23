"""Who may talk to a TurnOPD HTTP service, and where it may listen (pure; no web framework).

Rules: a service binds 127.0.0.1 unless told otherwise; bound anywhere else it refuses to start
without a shared bearer token (``TURNOPD_SERVICE_TOKEN`` or ``[security] service_token``). Once a
token is configured the service demands it on every request but its liveness check, wherever it
listens. Tokens are compared in constant time. Redis outside the loopback needs a password.
"""

import hmac
import ipaddress
from urllib.parse import urlsplit

from services.errors import ConfigError

TOKEN_ENV = "TURNOPD_SERVICE_TOKEN"
_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; False for 0.0.0.0, :: and every other address."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, service: str) -> None:
    """Refuse to expose ``service`` beyond the loopback without a token (ConfigError otherwise)."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to start the {service} on {host} without a service token: set {TOKEN_ENV} "
            "(or [security] service_token), or bind 127.0.0.1"
        )


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>`` (constant-time compare)."""
    if not authorization:
        return False
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


def auth_headers(token: str | None) -> dict[str, str]:
    """The request headers a client sends to a service holding ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def token_refusal(service: str, url: str, sent: bool) -> str:
    """What a client says when ``service`` at ``url`` answered 401 (``sent``: it had a token to send)."""
    what = "refused the service token" if sent else "demands a service token that this run does not have"
    return (
        f"the {service} at {url} {what} (401): set the same [security] service_token / {TOKEN_ENV} "
        "for the run and the server"
    )


def check_redis_url(url: str, allow_unauthenticated: bool) -> None:
    """Refuse a Redis URL that reaches beyond the loopback without a password."""
    parts = urlsplit(url)
    if parts.scheme == "unix" or allow_unauthenticated:
        return
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(f"redis_url must start with redis://, rediss:// or unix://, got {parts.scheme}://")
    host = parts.hostname or "localhost"
    if parts.password is None and not is_loopback(host):
        raise ConfigError(
            f"Redis at {host} has no password in its URL (redis://:PASSWORD@{host}:...): the controller "
            "state must not sit on an open Redis; set [security] allow_unauthenticated_redis = true "
            "only on a network you trust"
        )
