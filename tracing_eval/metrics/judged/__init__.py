"""The judged metric tier: LLM judges over the rendered thread.

`JUDGED_METRICS` maps each stable metric name to its class; `criterion_metric` builds the
custom criteria declared in config (`criterion:<name>`).
"""

from __future__ import annotations

from typing import Any

from tracing_eval.metrics.judged.completeness import Completeness
from tracing_eval.metrics.judged.conversational_flow import ConversationalFlow
from tracing_eval.metrics.judged.criteria import criterion_metric
from tracing_eval.metrics.judged.failure_rate import FailureRate
from tracing_eval.metrics.judged.knowledge_retention import KnowledgeRetention
from tracing_eval.metrics.judged.repetitive_pattern import RepetitivePattern
from tracing_eval.metrics.judged.role_adherence import RoleAdherence
from tracing_eval.metrics.judged.task_success import TaskSuccess
from tracing_eval.metrics.judged.tool_error_handling import ToolErrorHandling
from tracing_eval.metrics.judged.turn_relevancy import TurnRelevancy

JUDGED_METRICS: dict[str, Any] = {
    "repetitive_pattern": RepetitivePattern,
    "task_success": TaskSuccess,
    "failure_rate": FailureRate,
    "conversational_flow": ConversationalFlow,
    "completeness": Completeness,
    "knowledge_retention": KnowledgeRetention,
    "role_adherence": RoleAdherence,
    "turn_relevancy": TurnRelevancy,
    "tool_error_handling": ToolErrorHandling,
}

__all__ = ["JUDGED_METRICS", "criterion_metric"]
