"""The driver's /metrics over real HTTP on loopback: rendering, the bearer token, the bind rule."""

import httpx
import pytest
from prometheus_client import CollectorRegistry, Gauge

from services.errors import ConfigError
from services.orchestrator.metrics_exporter import MetricsExporter


@pytest.fixture
def registry():
    registry = CollectorRegistry()
    Gauge("turnopd_controller_h_hat", "H_hat.", registry=registry).set(7)
    return registry


def test_open_exporter_on_loopback_serves_the_registry(registry):
    with MetricsExporter(registry, "127.0.0.1", 0, token=None) as exporter:
        response = httpx.get(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5)
    assert response.status_code == 200
    assert "turnopd_controller_h_hat 7.0" in response.text


def test_with_a_token_every_scrape_needs_the_bearer(registry):
    with MetricsExporter(registry, "127.0.0.1", 0, token="s3cret") as exporter:
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        missing = httpx.get(url, timeout=5)
        wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=5)
        right = httpx.get(url, headers={"Authorization": "Bearer s3cret"}, timeout=5)
    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert "turnopd_" not in missing.text + wrong.text
    assert "turnopd_controller_h_hat 7.0" in right.text


def test_refuses_to_listen_beyond_the_loopback_without_a_token(registry):
    with pytest.raises(ConfigError, match=r"metrics exporter on 0\.0\.0\.0 without a service token"):
        MetricsExporter(registry, "0.0.0.0", 0, token=None)


def test_stop_frees_the_port(registry):
    exporter = MetricsExporter(registry, "127.0.0.1", 0, token=None).start()
    port = exporter.port
    exporter.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
    again = MetricsExporter(registry, "127.0.0.1", port, token=None).start()  # the port is reusable
    assert again.port == port
    again.stop()
