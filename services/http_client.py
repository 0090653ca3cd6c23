"""The base of the project's async HTTP clients (env gateway, teacher): one ``httpx.AsyncClient``
that sends the service token, closed by ``aclose`` or by leaving ``async with``."""

import functools
import ssl
from types import TracebackType
from typing import Self

import httpx

from services.service_auth import auth_headers


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificate store every client verifies against (httpx's default, with its SSL_CERT_FILE /
    SSL_CERT_DIR), loaded once per process: httpx loads it afresh for each client it builds, about
    20 ms of CPU, which a client built per call (the endpoint teacher's) paid on every call."""
    return httpx.create_ssl_context()


class AsyncHttpClient:
    def __init__(
        self,
        *,
        base_url: str = "",
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
        token: str | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            transport=transport,
            headers=auth_headers(token),
            verify=tls_context(),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()
