"""Shared secrets of the services (section ``[security]``): the bearer token, the Redis rule."""

import os

from pydantic import Field, SecretStr

from services.service_auth import TOKEN_ENV
from services.settings_section import Section


class SecuritySettings(Section):
    service_token: SecretStr | None = Field(
        None,
        description="Bearer token of every HTTP service and client (default: $TURNOPD_SERVICE_TOKEN); "
        "required to bind a service beyond 127.0.0.1.",
    )
    allow_unauthenticated_redis: bool = Field(
        False,
        description="Accept a redis_url beyond the loopback without a password (trusted networks only).",
    )

    def resolved_service_token(self) -> str | None:
        """The token: this setting, else $TURNOPD_SERVICE_TOKEN read now (never at import); None if unset."""
        if self.service_token is not None and self.service_token.get_secret_value():
            return self.service_token.get_secret_value()
        return os.environ.get(TOKEN_ENV) or None
