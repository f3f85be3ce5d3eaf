"""The metrics of a run, built by name from the registry, split into their two tiers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tracing_eval.config import ENV_PREFIX, ConfigError, Settings
from tracing_eval.metrics.base import Metric
from tracing_eval.metrics.judged import criterion_metric
from tracing_eval.metrics.judged.base import JudgedMetric
from tracing_eval.metrics.registry import metric_classes

CRITERION_PREFIX = "criterion:"
#: where the metric names of a run come from, as the config error names it
ENABLED_KEY = f"[metrics] enabled ({ENV_PREFIX}METRICS__ENABLED)"


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
    """Every metric a run may name: the registered ones, then the configured criteria."""
    return [*metric_classes(), *(CRITERION_PREFIX + c.name for c in settings.metrics.criteria)]


def build_metrics(settings: Settings, names: Sequence[str] | None = None) -> MetricSet:
    """Metrics by name (default: the configured ones, plus every configured criterion)."""
    wanted = list(names) if names is not None else list(settings.metrics.enabled)
    criteria = {CRITERION_PREFIX + c.name: c for c in settings.metrics.criteria}
    if names is None:
        wanted += [n for n in criteria if n not in wanted]
    classes = metric_classes()
    unknown = [n for n in wanted if n not in classes and n not in criteria]
    if unknown:
        where = f" in {ENABLED_KEY}" if names is None else ""
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)}{where}; known: {', '.join(known_names(settings))}")
    thresholds = settings.metrics.thresholds
    out = MetricSet(options={n: dict(v) for n, v in settings.metrics.options.items()})
    for name in wanted:
        if name in criteria:
            out.judged.append(criterion_metric(criteria[name]))
            continue
        metric = classes[name](thresholds.get(name))
        if metric.tier == "judge":
            out.judged.append(cast(JudgedMetric, metric))
        else:
            out.deterministic.append(cast(Metric, metric))
    return out
