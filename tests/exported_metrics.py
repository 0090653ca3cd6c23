"""Every Prometheus series name the TurnOPD exporters can produce, read from their real registries."""

import re

from prometheus_client import CollectorRegistry

from services.env_gateway.metrics import GatewayMetrics
from services.orchestrator.training_metrics import TrainingMetrics
from services.settings.tree import DiagnosticsSettings
from services.teacher_scorer.metrics import TeacherMetrics

PROMETHEUS_BUILTINS = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created", ""),
}


def registries() -> dict[str, CollectorRegistry]:
    """One registry per exporter: the driver (controller, learner, rollout pool), teacher, env gateway."""
    return {
        "driver": TrainingMetrics(
            CollectorRegistry(), max_turns=4, thresholds=DiagnosticsSettings()
        ).registry,
        "teacher": TeacherMetrics(replica="r").registry,
        "env-gateway": GatewayMetrics().registry,
    }


def exported_names(registry: CollectorRegistry) -> set[str]:
    """Series names a scrape of ``registry`` can show (counters as ``_total``, histograms as ``_bucket``...)."""
    return {family.name + suffix for family in registry.collect() for suffix in _SUFFIXES[family.type]}


def all_exported_names() -> set[str]:
    return set().union(*(exported_names(r) for r in registries().values()))


def metric_names_in(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (TurnOPD's and Prometheus' own)."""
    names = set(re.findall(r"\bturnopd_[a-z0-9_]+", expr))
    names |= {b for b in PROMETHEUS_BUILTINS if re.search(rf"\b{b}\s*[{{(\[]", expr)}
    return names
