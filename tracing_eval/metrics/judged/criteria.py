"""L10 custom criteria from config: metric `criterion:<name>`, one judge call per thread.

- kind `geval`: the judge scores the whole conversation 0-10 against the definition (no generated
  evaluation steps) → score = g / 10, no label.
- kind `critic`: a binary aspect critic, yes → 1.0 / no → 0.0, label `yes` / `no`.

Default threshold 0.7, so a critic passes on `yes`. Each instance builds its own spec because
names come from config; build instances with `criterion_metric(settings)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema

from tracing_eval.config import CriterionSettings
from tracing_eval.metrics.base import MetricSpec
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.answers import Answer, Text, one_of
from tracing_eval.metrics.judged.base import JudgeContext
from tracing_eval.metrics.judged.question import Question, ask_question, scored
from tracing_eval.metrics.judged.transcript import json_string
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread

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


def _score(value: Any) -> int:
    """An integer from 0 to GEVAL_MAX (an integral float reads as its integer); never a boolean or a string."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= GEVAL_MAX:
        raise ValueError(f"must be an integer from 0 to {GEVAL_MAX}; got {value!r}")
    return value


class GevalAnswer(Answer):
    reason: Text
    score: Annotated[
        int, PlainValidator(_score), WithJsonSchema({"type": "integer", "minimum": 0, "maximum": GEVAL_MAX})
    ]


class CriticAnswer(Answer):
    reason: Text
    verdict: Annotated[str, one_of(_CRITIC)]


@dataclass(frozen=True)
class Verdict:
    score: float
    label: str | None
    raw: int | str
    reason: str


def verdict_of(answer: GevalAnswer | CriticAnswer) -> Verdict:
    if isinstance(answer, GevalAnswer):
        return Verdict(answer.score / GEVAL_MAX, None, answer.score, answer.reason)
    return Verdict(_CRITIC[answer.verdict], answer.verdict, answer.verdict, answer.reason)


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

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Any] | list[MetricResult]:
        if not replies(thread):
            return [not_applicable(self.spec, "no assistant replies with text")]
        geval = self.settings.kind == "geval"
        template, answer = (GEVAL, GevalAnswer) if geval else (CRITIC, CriticAnswer)
        definition = json_string(self.settings.definition.strip())
        raw_key = "raw_score" if geval else "verdict"

        def result(answer: GevalAnswer | CriticAnswer) -> list[MetricResult]:
            verdict = verdict_of(answer)
            evidence = {"kind": self.settings.kind, raw_key: verdict.raw, "definition": self.settings.definition}
            return [ok(self.spec, verdict.score, label=verdict.label, reason=verdict.reason, evidence=evidence)]

        instructions = template.format(name=self.settings.name, definition=definition)
        return Question(self.spec, instructions, answer.response_schema(), answer.parser(), scored(result))

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        question = self.question(thread, ctx)
        return question if isinstance(question, list) else await ask_question(question, thread, ctx)


def criterion_metric(settings: CriterionSettings) -> CriterionMetric:
    """The judged metric `criterion:<settings.name>` for one configured criterion."""
    return CriterionMetric(settings)
