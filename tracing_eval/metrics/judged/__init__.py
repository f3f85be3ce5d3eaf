"""The judged metric tier: LLM judges over the rendered thread.

Each module below defines one judged metric class, which registers it
(`tracing_eval.metrics.registry`); `criteria.criterion_metric` builds the custom criteria declared
in config (`criterion:<name>`). A new built-in judged metric is one module here and one name in
this import.
"""

from __future__ import annotations

from tracing_eval.metrics.judged import (  # noqa: F401  (importing a metric's module registers it)
    completeness,
    conversational_flow,
    failure_rate,
    knowledge_retention,
    repetitive_pattern,
    role_adherence,
    task_success,
    tool_error_handling,
    turn_relevancy,
)
from tracing_eval.metrics.judged.criteria import criterion_metric

__all__ = ["criterion_metric"]
