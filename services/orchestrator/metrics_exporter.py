"""The driver's ``/metrics`` endpoint: one Prometheus registry over HTTP, guarded by the service token.

Loopback by default; bound anywhere else it refuses to start without a token. With a token every
request must carry ``Authorization: Bearer <token>`` (401 otherwise). Nothing is read from request
bodies: the endpoint only renders the registry.
"""

import socket
import threading
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from services.service_auth import bearer_matches, check_bind

_UNAUTHORIZED = b"missing or wrong bearer token\n"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes every few seconds: no access log
        pass


def _server_class(host: str) -> type[WSGIServer]:
    family = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]

    class ThreadingServer(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = family

    return ThreadingServer


def guarded_app(registry: CollectorRegistry, token: str | None) -> Any:
    """The WSGI app rendering ``registry``; 401 unless the bearer token matches (when one is set)."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if token is not None and not bearer_matches(environ.get("HTTP_AUTHORIZATION"), token):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="turnopd"')],
            )
            return [_UNAUTHORIZED]
        result: Iterable[bytes] = metrics_app(environ, start_response)
        return result

    return app


class MetricsExporter:
    """``with MetricsExporter(registry, host, port, token) as exporter: ... exporter.port ...``."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, token: str | None) -> None:
        check_bind(host, token, "metrics exporter")
        self._app = guarded_app(registry, token)
        self.host = host
        self._requested_port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the one the OS picked for port 0)."""
        if self._server is None:
            raise RuntimeError("the metrics exporter is not running")
        return int(self._server.server_address[1])

    def start(self) -> "MetricsExporter":
        server = make_server(
            self.host, self._requested_port, self._app, _server_class(self.host), _QuietHandler
        )
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="metrics-exporter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "MetricsExporter":
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
