"""The result constructors every metric uses: one result of a metric (its spec) on a thread or a turn.

Each takes the metric's `spec` first and `turn_index` (None: the thread result, else that turn's),
so a result always carries the metric's name, version and threshold as declared.

- `ok`: a score in [0, 1] (clipped, rounded), `passed` from the threshold;
- `not_applicable`: nothing to judge (no threshold recorded: there is no verdict to pass);
- `skipped`: a verdict not computed on purpose (e.g. a gate), with the reason;
- `failed`: an `error` result, the exception named; never a default score.
"""

from __future__ import annotations

from typing import Any

from tracing_eval.metrics.base import MetricSpec
from tracing_eval.model import MetricResult, Scope, Status


def _result(spec: MetricSpec, turn_index: int | None, **fields: Any) -> MetricResult:
    """A result of `spec` on the thread (`turn_index` None) or on that turn."""
    fields["metric"] = spec.name
    fields["metric_version"] = spec.version
    fields["scope"] = Scope.THREAD if turn_index is None else Scope.TURN
    fields["turn_index"] = turn_index
    return MetricResult.model_validate(fields)  # as `MetricResult(**fields)`, without a keyword round trip


def ok(
    spec: MetricSpec,
    score: float,
    *,
    turn_index: int | None = None,
    label: str | None = None,
    reason: str = "",
    evidence: dict[str, Any] | None = None,
) -> MetricResult:
    """An `ok` result; `passed` is `score >= threshold` (None without a threshold)."""
    score = min(1.0, max(0.0, score))
    return _result(
        spec,
        turn_index,
        score=round(score, 4),
        label=label,
        passed=None if spec.threshold is None else score >= spec.threshold,
        threshold=spec.threshold,
        reason=reason,
        evidence=evidence or {},
    )


def not_applicable(
    spec: MetricSpec, reason: str, *, turn_index: int | None = None, evidence: dict[str, Any] | None = None
) -> MetricResult:
    return _result(spec, turn_index, status=Status.NOT_APPLICABLE, reason=reason, evidence=evidence or {})


def skipped(
    spec: MetricSpec, reason: str, *, turn_index: int | None = None, evidence: dict[str, Any] | None = None
) -> MetricResult:
    return _result(
        spec, turn_index, status=Status.SKIPPED, reason=reason, threshold=spec.threshold, evidence=evidence or {}
    )


def failed(spec: MetricSpec, exc: BaseException, why: str, *, turn_index: int | None = None) -> MetricResult:
    """An `error` result: `why` says what failed (e.g. "judge failed"), `exc` how."""
    return _result(
        spec,
        turn_index,
        status=Status.ERROR,
        error=f"{type(exc).__name__}: {exc}",
        reason=f"{why}: {exc}",
        threshold=spec.threshold,
    )
