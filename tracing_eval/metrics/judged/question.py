"""A thread metric's question about the whole transcript, asked alone or batched with others.

A thread metric that reads the transcript builds a `Question` (instructions, schema, parser and
what to make of the answer) instead of calling the judge itself. `ask_question` asks it alone;
`tracing_eval.metrics.judged.batch` can ask several in one request. Either way the metric's
`finish` turns the parsed answer into results, and the results record the judge, tokens, cost,
what the transcript left out and any suspected injection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from tracing_eval.metrics.base import MetricBase, MetricSpec
from tracing_eval.metrics.judged.answers import Answer
from tracing_eval.metrics.judged.base import JudgeContext, JudgeError, JudgeRequest, JudgeUsage, annotate, with_usage
from tracing_eval.metrics.judged.transcript import Rendered
from tracing_eval.metrics.results import failed, ok
from tracing_eval.model import MetricResult, Status, Thread

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
        return settle([failed(question.spec, exc, "judge failed")], exc.usage, rendered, ctx)
    return settle(await question.finish(answer, usage), usage, rendered, ctx)


class QuestionMetric(MetricBase):
    """A thread metric that is one question about the transcript (`question`), or settled without one."""

    tier = "judge"
    scopes = ("thread",)

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


class VerdictMetric(QuestionMetric):
    """A thread metric answered by one verdict on a scale: `answer` is its pydantic model, whose
    fields are the evidence items (a list, first), `reason`, then `verdict` (a label of `scale`).

    The result scores the verdict's weight on the scale, labelled with it, with the verdict and the
    items (and any `evidence` given) in its evidence. Subclasses say when the question applies
    (`question`, returning `self.ask(...)` or the results without a call).
    """

    scale: ClassVar[Mapping[str, float]]
    answer: ClassVar[type[Answer]]
    instructions: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        fields = list(cls.answer.model_fields) if "answer" in cls.__dict__ else None
        if fields is not None and (len(fields) != 3 or fields[1:] != ["reason", "verdict"]):
            raise TypeError(f"{cls.__qualname__}.answer must have the fields <items>, reason, verdict; has {fields}")
        super().__init_subclass__(**kwargs)  # registers the metric

    def ask(
        self,
        numbers: Mapping[str, Collection[int]],
        *,
        instructions: str | None = None,
        evidence: Mapping[str, Any] | None = None,
        keep_turns: frozenset[int] = frozenset(),
    ) -> Question[Answer]:
        """The question, with the thread's message numbers by kind (e.g. `{"numbers": {1, 2}}`)."""
        details = next(iter(self.answer.model_fields))

        def result(answer: Answer) -> list[MetricResult]:
            said = answer.model_dump()
            verdict = said["verdict"]
            found = {"verdict": verdict, details: said[details], **(evidence or {})}
            return [ok(self.spec, self.scale[verdict], label=verdict, reason=said["reason"], evidence=found)]

        return Question(
            self.spec,
            self.instructions if instructions is None else instructions,
            self.answer.response_schema(**numbers),
            self.answer.parser(**numbers),
            scored(result),
            keep_turns,
        )


async def ask_turn(
    spec: MetricSpec,
    request: JudgeRequest,
    parse: Callable[[Any], T],
    make: Callable[[T], MetricResult],
    rendered: Rendered,
    injection: list[dict[str, Any]],
    ctx: JudgeContext,
    turn_index: int,
) -> tuple[MetricResult, JudgeUsage]:
    """Ask one per-turn question; `make` turns the answer into the turn's result, which records what
    was sent (`input_hash`, so an unchanged turn can be reused), the judge, tokens and cost, what the
    transcript left out and any suspected injection. A judge failure is the turn's `error` result."""
    try:
        answer, usage = await ctx.judge.ask(request, parse)
    except JudgeError as exc:
        return failed(spec, exc, "judge failed", turn_index=turn_index), exc.usage
    result = make(answer)
    result.input_hash = request.digest()
    return annotate(with_usage(result, usage, ctx.judge.model), rendered, injection), usage


def over_turns(
    spec: MetricSpec, turns: list[MetricResult], usage: JudgeUsage, ctx: JudgeContext, make: Callable[..., MetricResult]
) -> MetricResult:
    """The thread result of a per-turn metric: `make(ok, unjudged)` over the turns that were judged
    (`ok`) and the turn indexes that could not be (`unjudged`), or an error when none was judged;
    with the usage of every turn's call."""
    judged = [r for r in turns if r.status == Status.OK]
    unjudged = [r.turn_index for r in turns if r.status != Status.OK]
    if not judged:
        result = failed(spec, JudgeError(f"no turn could be judged ({len(unjudged)} failed)"), "judge failed")
    else:
        result = make(judged, unjudged)
    return with_usage(result, usage, ctx.judge.model)
