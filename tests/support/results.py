"""Results as tests build them: any metric name, threshold and scope, no metric spec needed (the
product's metrics build theirs with `tracing_eval.metrics.results`)."""

from __future__ import annotations

from typing import Any

from tracing_eval.model import MetricResult, Scope, Status


def score_result(
    metric: str,
    score: float,
    *,
    threshold: float | None,
    scope: Scope = Scope.THREAD,
    turn_index: int | None = None,
    label: str | None = None,
    reason: str = "",
    evidence: dict[str, Any] | None = None,
    version: str = "1",
) -> MetricResult:
    """Build an `ok` result, deriving `passed` from the threshold."""
    score = min(1.0, max(0.0, score))
    return MetricResult(
        metric=metric,
        metric_version=version,
        scope=scope,
        turn_index=turn_index,
        score=round(score, 4),
        label=label,
        passed=None if threshold is None else score >= threshold,
        threshold=threshold,
        reason=reason,
        evidence=evidence or {},
    )


def not_applicable(
    metric: str, reason: str, *, scope: Scope = Scope.THREAD, turn_index: int | None = None, version: str = "1"
) -> MetricResult:
    return MetricResult(
        metric=metric,
        metric_version=version,
        scope=scope,
        turn_index=turn_index,
        status=Status.NOT_APPLICABLE,
        reason=reason,
    )
