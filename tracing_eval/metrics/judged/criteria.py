"""L10 custom criteria from config: metric `criterion:<name>`, one judge call per thread.

- kind `geval`: the judge scores the whole conversation 0-10 against the definition (no generated
  evaluation steps) → score = g / 10, no label.
- kind `critic`: a binary aspect critic, yes → 1.0 / no → 0.0, label `yes` / `no`.

Default threshold 0.7, so a critic passes on `yes`. Each instance builds its own spec because
names come from config; build instances with `criterion_metric(settings)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracing_eval.config import CriterionSettings
from tracing_eval.metrics.base import MetricSpec
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.base import JudgeContext, MalformedAnswer, label_of, strict_object, text_of
from tracing_eval.metrics.judged.question import Question, ask_question, scored
from tracing_eval.metrics.judged.transcript import json_string
from tracing_eval.model import MetricResult, Thread, not_applicable, score_result

PREFIX = "criterion:"
VERSION = "2"
DEFAULT_THRESHOLD = 0.7
GEVAL_MAX = 10
_CRITIC = {"yes": 1.0, "no": 0.0}

GEVAL = """\
TASK: custom criterion "{name}".
Criterion (from the evaluation's configuration): {definition}
Rate how well the whole conversation above meets this criterion, as an integer from 0 (not at all) \
to 10 (fully, throughout). Weigh every assistant message; one serious violation keeps the score low.
Answer in JSON: reason (short, naming the messages [n] behind the score), then score."""

CRITIC = """\
TASK: custom criterion "{name}".
Criterion (from the evaluation's configuration): {definition}
Does the conversation above meet this criterion?
Answer in JSON: reason (short, naming the messages [n] behind the verdict), then verdict (yes or no)."""

GEVAL_SCHEMA: dict[str, Any] = strict_object(
    {"reason": {"type": "string"}, "score": {"type": "integer", "minimum": 0, "maximum": GEVAL_MAX}}
)
CRITIC_SCHEMA: dict[str, Any] = strict_object(
    {"reason": {"type": "string"}, "verdict": {"type": "string", "enum": list(_CRITIC)}}
)


@dataclass(frozen=True)
class Verdict:
    score: float
    label: str | None
    raw: int | str
    reason: str


def parse_geval(data: Any) -> Verdict:
    if not isinstance(data, dict):
        raise MalformedAnswer("the answer must be a JSON object")
    g = data.get("score")
    if isinstance(g, float) and g.is_integer():
        g = int(g)
    if not isinstance(g, int) or isinstance(g, bool) or not 0 <= g <= GEVAL_MAX:
        raise MalformedAnswer(f"'score' must be an integer from 0 to {GEVAL_MAX}; got {g!r}")
    return Verdict(g / GEVAL_MAX, None, g, text_of(data, "reason"))


def parse_critic(data: Any) -> Verdict:
    verdict = label_of(data, "verdict", _CRITIC)
    return Verdict(_CRITIC[verdict], verdict, verdict, text_of(data, "reason"))


class CriterionMetric:
    """A config-defined criterion judged over the whole thread (G-Eval score or yes/no critic)."""

    def __init__(self, settings: CriterionSettings, threshold: float | None = None) -> None:
        self.settings = settings
        chosen = threshold if threshold is not None else settings.threshold
        self.spec = MetricSpec(
            name=PREFIX + settings.name,
            version=VERSION,
            tier="judge",
            scopes=("thread",),
            threshold=DEFAULT_THRESHOLD if chosen is None else chosen,
            description=f"Custom {settings.kind} criterion: {settings.definition}",
        )

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Verdict] | list[MetricResult]:
        name = self.spec.name
        if not replies(thread):
            return [not_applicable(name, "no assistant replies with text", version=VERSION)]
        geval = self.settings.kind == "geval"
        template, schema, parse = (GEVAL, GEVAL_SCHEMA, parse_geval) if geval else (CRITIC, CRITIC_SCHEMA, parse_critic)
        definition = json_string(self.settings.definition.strip())
        raw_key = "raw_score" if geval else "verdict"

        def result(verdict: Verdict) -> list[MetricResult]:
            evidence = {"kind": self.settings.kind, raw_key: verdict.raw, "definition": self.settings.definition}
            return [
                score_result(
                    name,
                    verdict.score,
                    threshold=self.spec.threshold,
                    label=verdict.label,
                    reason=verdict.reason,
                    evidence=evidence,
                    version=VERSION,
                )
            ]

        instructions = template.format(name=self.settings.name, definition=definition)
        return Question(self.spec, instructions, schema, parse, scored(result))

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        question = self.question(thread, ctx)
        return question if isinstance(question, list) else await ask_question(question, thread, ctx)


def criterion_metric(settings: CriterionSettings) -> CriterionMetric:
    """The judged metric `criterion:<settings.name>` for one configured criterion."""
    return CriterionMetric(settings)
