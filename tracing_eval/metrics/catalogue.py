"""The metric catalogue: every metric the engine knows, by name, split into its two tiers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracing_eval.config import ConfigError, Settings
from tracing_eval.metrics.base import Metric
from tracing_eval.metrics.deterministic import DETERMINISTIC_METRICS
from tracing_eval.metrics.judged import JUDGED_METRICS, criterion_metric
from tracing_eval.metrics.judged.base import JudgedMetric

CRITERION_PREFIX = "criterion:"


@dataclass
class MetricSet:
    """The metrics of one run: deterministic first, then the judged ones with their options."""

    deterministic: list[Metric] = field(default_factory=list)
    judged: list[JudgedMetric] = field(default_factory=list)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [m.spec.name for m in self.deterministic] + [m.spec.name for m in self.judged]


def known_names(settings: Settings) -> list[str]:
    return [*DETERMINISTIC_METRICS, *JUDGED_METRICS, *(CRITERION_PREFIX + c.name for c in settings.metrics.criteria)]


def build_metrics(settings: Settings, names: Sequence[str] | None = None) -> MetricSet:
    """Metrics by name (default: the configured ones, plus every configured criterion)."""
    wanted = list(names) if names is not None else list(settings.metrics.enabled)
    criteria = {CRITERION_PREFIX + c.name: c for c in settings.metrics.criteria}
    if names is None:
        wanted += [n for n in criteria if n not in wanted]
    unknown = [n for n in wanted if n not in DETERMINISTIC_METRICS and n not in JUDGED_METRICS and n not in criteria]
    if unknown:
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(known_names(settings))}")
    thresholds = settings.metrics.thresholds
    out = MetricSet(options={n: dict(v) for n, v in settings.metrics.options.items()})
    for name in wanted:
        if name in DETERMINISTIC_METRICS:
            out.deterministic.append(DETERMINISTIC_METRICS[name](thresholds.get(name)))
        elif name in criteria:
            out.judged.append(criterion_metric(criteria[name]))
        else:
            out.judged.append(JUDGED_METRICS[name](thresholds.get(name)))
    return out
