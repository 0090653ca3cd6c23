"""The teacher's OpenAPI document: Prometheus text on /metrics, both 422 shapes on /v1/score, the
413 of the caps, and the caps themselves in the description."""

from services.teacher_scorer.routes import build_http_app


def test_metrics_is_documented_as_prometheus_text():
    responses = build_http_app(lambda: None).openapi()["paths"]["/metrics"]["get"]["responses"]
    assert list(responses["200"]["content"]) == ["text/plain"]
    assert responses["200"]["content"]["text/plain"]["schema"] == {"type": "string"}
    assert responses["401"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorDetail"
    }


def test_score_documents_the_refusal_and_the_validation_error_and_503():
    paths = build_http_app(lambda: None).openapi()["paths"]
    score = paths["/v1/score"]["post"]["responses"]
    assert sorted(score) == ["200", "400", "401", "413", "422", "503"]
    assert score["422"]["content"]["application/json"]["schema"]["anyOf"] == [
        {"$ref": "#/components/schemas/InvalidRequest"},
        {"$ref": "#/components/schemas/ErrorDetail"},
    ]
    health = paths["/healthz"]["get"]["responses"]
    assert health["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TeacherHealth"
    }
    assert sorted(health) == ["200"]  # liveness only: no model, no 503
    ready = paths["/readyz"]["get"]["responses"]
    assert sorted(ready) == ["200", "401", "503"]
