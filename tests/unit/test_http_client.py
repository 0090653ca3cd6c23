"""The project's HTTP clients load the certificate store once per process, not once per client."""

import asyncio
import ssl
from collections.abc import Iterator

import pytest

from services.env_gateway.client import EnvGatewayClient
from services.http_client import tls_context
from services.teacher_scorer.endpoint_client import EndpointTeacherClient


@pytest.fixture
def context_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SSL context built with a certificate store (about 20 ms of CPU each), by cafile/capath."""
    built: list[str] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(str(kwargs.get("cafile") or kwargs.get("capath")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    tls_context.cache_clear()
    yield built
    tls_context.cache_clear()


def test_a_client_per_call_loads_the_certificate_store_once(context_builds: list[str]) -> None:
    async def build_clients() -> None:
        endpoint = EndpointTeacherClient("http://127.0.0.1:9/teacher", "teacher")
        for _ in range(3):  # the endpoint client builds one httpx client per call
            async with endpoint._http():
                pass
        async with EnvGatewayClient("http://127.0.0.1:9", timeout_s=1.0):
            pass

    asyncio.run(build_clients())
    assert len(context_builds) == 1
    assert tls_context() is tls_context()
