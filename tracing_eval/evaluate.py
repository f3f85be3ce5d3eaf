"""Run metrics over a thread, isolating failures so one metric never sinks the others."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tracing_eval.metrics.base import Metric
from tracing_eval.model import MetricResult, Scope, Status, Thread


def evaluate_thread(thread: Thread, metrics: Sequence[Metric]) -> list[MetricResult]:
    """All results for the thread; a metric that raises yields one `error` result with the reason."""
    out: list[MetricResult] = []
    for metric in metrics:
        started = time.perf_counter()
        try:
            results = metric.evaluate(thread)
        except Exception as exc:  # a metric bug must not lose the thread's other scores
            results = [
                MetricResult(
                    metric=metric.spec.name,
                    metric_version=metric.spec.version,
                    scope=Scope.THREAD,
                    status=Status.ERROR,
                    error=f"{type(exc).__name__}: {exc}",
                    reason=f"metric failed: {type(exc).__name__}: {exc}",
                )
            ]
        elapsed = (time.perf_counter() - started) * 1000 / max(1, len(results))
        for r in results:
            r.duration_ms = round(elapsed, 3)
        out.extend(results)
    return out
