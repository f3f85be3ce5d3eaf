"""The review rule: which results send a thread to the review queue, and why."""

from __future__ import annotations

from typing import Any

from tracing_eval.config import ReviewSettings
from tracing_eval.model import MetricResult, Status


def review_reasons(results: list[MetricResult], rule: ReviewSettings) -> list[dict[str, Any]]:
    """One reason per routed result; empty means the thread is not routed."""
    if not rule.enabled:
        return []
    watched = set(rule.metrics)
    reasons = []
    for r in results:
        if "*" not in watched and r.metric not in watched:
            continue
        failed = r.status is Status.OK and r.passed is False
        flagged = r.status is Status.OK and r.label is not None and r.label in rule.labels
        errored = rule.include_errors and r.status is Status.ERROR
        if failed or flagged or errored:
            reasons.append(
                {
                    "metric": r.metric,
                    "target": "thread" if r.turn_index is None else f"turn {r.turn_index}",
                    "score": r.score,
                    "threshold": r.threshold,
                    "label": r.label,
                    "status": r.status.value,
                    "reason": r.reason or (r.error or ""),
                }
            )
    return reasons
