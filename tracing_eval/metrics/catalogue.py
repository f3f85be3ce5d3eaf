"""The metric catalogue: every metric the engine knows, registered by name."""

from __future__ import annotations

from tracing_eval.metrics.base import Registry
from tracing_eval.metrics.deterministic import DETERMINISTIC_METRICS


def default_registry() -> Registry:
    registry = Registry()
    for name, cls in DETERMINISTIC_METRICS.items():
        registry.register(name, cls)
    return registry
