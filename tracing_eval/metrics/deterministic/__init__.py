"""The deterministic metric tier: no API key, pure functions over a thread, fast.

`DETERMINISTIC_METRICS` maps each stable metric name to its class; a class takes an optional
threshold (None = the metric's default) and satisfies the `Metric` protocol.
"""

from __future__ import annotations

from tracing_eval.metrics.deterministic.reask import Reask
from tracing_eval.metrics.deterministic.refusal_loop import RefusalLoop
from tracing_eval.metrics.deterministic.repetition import Repetition
from tracing_eval.metrics.deterministic.response_hygiene import ResponseHygiene
from tracing_eval.metrics.deterministic.thread_stats import ThreadStats
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.deterministic.user_friction import UserFriction

DETERMINISTIC_METRICS: dict[str, type] = {
    "repetition": Repetition,
    "reask": Reask,
    "refusal_loop": RefusalLoop,
    "tool_errors": ToolErrors,
    "user_friction": UserFriction,
    "response_hygiene": ResponseHygiene,
    "thread_stats": ThreadStats,
}

__all__ = [
    "DETERMINISTIC_METRICS",
    "Reask",
    "RefusalLoop",
    "Repetition",
    "ResponseHygiene",
    "ThreadStats",
    "ToolErrors",
    "UserFriction",
]
