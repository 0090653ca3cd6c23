"""A sync httpx transport that hands each request to an ASGI app in-process (no socket), so a
client's own httpx stack can be tested against the real server app."""

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient


def app_transport(app: FastAPI) -> httpx.MockTransport:
    """Requests sent through it are replayed to ``app``; its answers come back as httpx responses."""
    server = TestClient(app)

    def forward(request: httpx.Request) -> httpx.Response:
        # The test client speaks its own httpx package: copy the request over and the answer back.
        answer = server.request(
            request.method, str(request.url), content=request.content, headers=request.headers
        )
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    return httpx.MockTransport(forward)
