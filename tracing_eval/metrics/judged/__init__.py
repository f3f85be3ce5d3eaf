"""The judged metric tier: LLM judges over the rendered thread.

`JUDGED_METRICS` maps each stable metric name to its class; `criterion_metric` builds the
custom criteria declared in config (`criterion:<name>`).
"""

from __future__ import annotations

from typing import Any

from tracing_eval.config import CriterionSettings

JUDGED_METRICS: dict[str, Any] = {}


def criterion_metric(settings: CriterionSettings) -> Any:
    raise NotImplementedError("custom criteria are not wired yet")
