"""The deterministic metric tier: no API key, pure functions over a thread, fast.

Each module below defines one metric class (a `MetricBase` subclass with its `name`), which
registers it (`tracing_eval.metrics.registry`); a class takes an optional threshold (None = the
metric's default) and satisfies the `Metric` protocol. A new built-in metric is one module here
and one name in this import.
"""

from __future__ import annotations

from tracing_eval.metrics.deterministic import (  # noqa: F401  (importing a metric's module registers it)
    reask,
    refusal_loop,
    repetition,
    response_hygiene,
    thread_stats,
    tool_errors,
    user_friction,
)
