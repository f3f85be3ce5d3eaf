"""A thread metric's question about the whole transcript, asked alone or batched with others.

A thread metric that reads the transcript builds a `Question` (instructions, schema, parser and
what to make of the answer) instead of calling the judge itself. `ask_question` asks it alone;
`tracing_eval.metrics.judged.batch` can ask several in one request. Either way the metric's
`finish` turns the parsed answer into results, and the results record the judge, tokens, cost,
what the transcript left out and any suspected injection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tracing_eval.metrics.base import MetricBase, MetricSpec
from tracing_eval.metrics.judged.base import (
    JudgeContext,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    annotate,
    items_of,
    judge_error,
    label_of,
    strict_object,
    text_of,
    verdict_schema,
    with_usage,
)
from tracing_eval.metrics.judged.transcript import Rendered
from tracing_eval.model import MetricResult, Scope, Thread, score_result

T = TypeVar("T")


@dataclass(frozen=True)
class Question(Generic[T]):
    """One metric's question about the thread's whole transcript.

    `finish(answer, usage)` makes the metric's results from the parsed answer; it may ask the judge
    further (adding to `usage`). `keep_turns` are turns the metric needs kept when the transcript
    is over its budget.
    """

    spec: MetricSpec
    instructions: str
    schema: Mapping[str, Any]
    parse: Callable[[Any], T]
    finish: Callable[[T, JudgeUsage], Awaitable[list[MetricResult]]]
    keep_turns: frozenset[int] = field(default_factory=frozenset)


def settle(results: list[MetricResult], usage: JudgeUsage, rendered: Rendered, ctx: JudgeContext) -> list[MetricResult]:
    """Usage, transcript notes and suspected injection on every result of a question."""
    injection = ctx.transcripts.injection()
    return [annotate(with_usage(r, usage, ctx.judge.model), rendered, injection) for r in results]


async def ask_question(question: Question[Any], thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
    """Ask one question over the whole transcript; a judge failure is one `error` result."""
    rendered = ctx.transcripts.whole(question.keep_turns)
    request = JudgeRequest(question.spec.name, rendered.text, question.instructions, question.schema, thread.key)
    try:
        answer, usage = await ctx.judge.ask(request, question.parse)
    except JudgeError as exc:
        return settle([judge_error(question.spec, exc)], exc.usage, rendered, ctx)
    return settle(await question.finish(answer, usage), usage, rendered, ctx)


class QuestionMetric(MetricBase):
    """A thread metric that is one question about the transcript (`question`), or settled without one."""

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Any] | list[MetricResult]:
        """The question to ask, or the results when no call is needed (not applicable, skipped)."""
        raise NotImplementedError

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        question = self.question(thread, ctx)
        if isinstance(question, list):
            return question
        return await ask_question(question, thread, ctx)


def scored(make: Callable[[T], list[MetricResult]]) -> Callable[[T, JudgeUsage], Awaitable[list[MetricResult]]]:
    """A `finish` from a plain function of the answer (most metrics need nothing else)."""

    async def finish(answer: T, _usage: JudgeUsage) -> list[MetricResult]:
        return make(answer)

    return finish


#: A field of a verdict's evidence items: its JSON schema, and how to read it from an item (or raise
#: MalformedAnswer), e.g. `({"type": "string"}, text_of)`.
Field = tuple[Mapping[str, Any], Callable[[Any, str], Any]]


@dataclass(frozen=True)
class Verdict:
    """A single-verdict answer: the evidence items, the reason, then the label."""

    details: list[dict[str, Any]]
    reason: str
    verdict: str


def verdict_question(
    spec: MetricSpec,
    scale: Mapping[str, float],
    instructions: str,
    details: str,
    fields: Mapping[str, Field],
    evidence: Mapping[str, Any] | None = None,
    keep_turns: frozenset[int] = frozenset(),
) -> Question[Verdict]:
    """A thread question answered `{<details>: [items], reason, verdict}` on `scale`; the result scores
    the verdict's weight, labelled with it, with the items (and `evidence`) in its evidence."""
    schema = verdict_schema(scale, details, strict_object({k: f[0] for k, f in fields.items()}))

    def parse(data: Any) -> Verdict:
        items = [{k: read(x, k) for k, (_, read) in fields.items()} for x in items_of(data, details)]
        return Verdict(items, text_of(data, "reason"), label_of(data, "verdict", scale))

    def result(answer: Verdict) -> list[MetricResult]:
        found = {"verdict": answer.verdict, details: answer.details, **(evidence or {})}
        weight = scale[answer.verdict]
        return [
            score_result(
                spec.name,
                weight,
                threshold=spec.threshold,
                scope=Scope.THREAD,
                label=answer.verdict,
                reason=answer.reason,
                evidence=found,
                version=spec.version,
            )
        ]

    return Question(spec, instructions, schema, parse, scored(result), keep_turns)
