"""Run metrics over a thread: the deterministic tier first, then the judged tier concurrently.

Failures are isolated: a metric that raises yields one `error` result with the reason, and the
thread's other metrics still score.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tracing_eval.metrics.base import Metric
from tracing_eval.metrics.catalogue import MetricSet
from tracing_eval.metrics.judged.base import Judge, JudgedMetric
from tracing_eval.metrics.judged.tier import evaluate_judged
from tracing_eval.model import MetricResult, Scope, Status, Thread

#: Thread metadata keys that are metric options (e.g. from the `eval` input line).
THREAD_OPTION_KEYS = ("task_description", "success_criteria", "role")


def _failed(metric: Metric | JudgedMetric, exc: BaseException) -> MetricResult:
    return MetricResult(
        metric=metric.spec.name,
        metric_version=metric.spec.version,
        scope=Scope.THREAD,
        status=Status.ERROR,
        error=f"{type(exc).__name__}: {exc}",
        reason=f"metric failed: {type(exc).__name__}: {exc}",
    )


def _timed(results: list[MetricResult], started: float) -> list[MetricResult]:
    elapsed = (time.perf_counter() - started) * 1000 / max(1, len(results))
    for r in results:
        r.duration_ms = round(elapsed, 3)
    return results


def evaluate_thread(thread: Thread, metrics: Sequence[Metric]) -> list[MetricResult]:
    """The deterministic tier: all results for the thread, in metric order."""
    out: list[MetricResult] = []
    for metric in metrics:
        started = time.perf_counter()
        try:
            results = metric.evaluate(thread)
        except Exception as exc:  # a metric bug must not lose the thread's other scores
            results = [_failed(metric, exc)]
        out.extend(_timed(results, started))
    return out


def metric_options(metric: str, configured: dict[str, dict[str, Any]], thread: Thread) -> dict[str, Any]:
    """Config options of a metric, overridden by the thread's own metadata (task, criteria, role)."""
    options = dict(configured.get(metric, {}))
    options.update({k: thread.metadata[k] for k in THREAD_OPTION_KEYS if thread.metadata.get(k)})
    return options


async def evaluate_all(
    thread: Thread,
    metrics: MetricSet,
    judge: Judge | None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
    *,
    turns_only: bool = False,
) -> list[MetricResult]:
    """Both tiers. Without a judge only the deterministic tier runs; with `turns_only` the judged
    metrics that only score whole threads wait for the thread to go idle."""
    deterministic = evaluate_thread(thread, metrics.deterministic)
    judged_metrics = [m for m in metrics.judged if not turns_only or "turn" in m.spec.scopes]
    if judge is None or not judged_metrics or not thread.turns:
        return deterministic
    judged = await evaluate_judged(
        thread,
        judged_metrics,
        judge,
        deterministic,
        lambda name: metric_options(name, metrics.options, thread),
        reuse,
    )
    return deterministic + judged
