"""How every standalone TurnOPD HTTP server starts: the bind rule first, then uvicorn.

The env gateway, the retrieval server and the webshop server all start here, so none can listen
beyond the loopback without a service token (``services.service_auth.check_bind``); the teacher
runs behind Serve's proxy and applies the same rule to the proxy's address.
"""

import uvicorn
from starlette.types import ASGIApp

from services.service_auth import check_bind


def run_http_server(
    app: ASGIApp, host: str, port: int, token: str | None, service: str, log_level: str = "info"
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted; ConfigError first if ``host`` is beyond the
    loopback and there is no ``token``."""
    check_bind(host, token, service)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
