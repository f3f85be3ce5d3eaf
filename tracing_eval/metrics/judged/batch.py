"""Thread metrics' questions in one judge request (`judge.batch_thread_metrics`).

The transcript is sent once, followed by every question under its own heading; the schema is an
object with one property per metric, each that metric's own schema. A part that does not parse
makes the answer malformed: the judge is asked once more (the client's one corrective re-ask),
and parts that parsed in either answer are kept. A metric whose part failed both times gets an
`error` result; the others score. The call's tokens and cost are shared equally by its metrics,
and each result lists the metrics it was asked with in `evidence.batched_with`.
"""

from __future__ import annotations

from typing import Any

from tracing_eval.metrics.judged.base import (
    JudgeContext,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    MalformedAnswer,
    strict_object,
)
from tracing_eval.metrics.judged.question import Question, settle
from tracing_eval.metrics.results import failed
from tracing_eval.model import MetricResult, Thread

METRIC = "thread_metrics"  # the metric name a batched call is counted under

HEAD = """\
Answer each of the {n} questions below about the conversation above. Judge each one on its own, \
by its own rules, as if it were the only question. Reply with one JSON object that has one \
property per question, named as in the question's heading, holding that question's answer."""


def instructions(questions: list[Question[Any]]) -> str:
    parts = [HEAD.format(n=len(questions))]
    parts += [f'## Question "{q.spec.name}"\n{q.instructions}' for q in questions]
    return "\n\n".join(parts)


def schema(questions: list[Question[Any]]) -> dict[str, Any]:
    return strict_object({q.spec.name: q.schema for q in questions})


class Parts:
    """Parses a batched answer part by part, keeping every part that parsed in any attempt."""

    def __init__(self, questions: list[Question[Any]]) -> None:
        self.questions = questions
        self.good: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def __call__(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise MalformedAnswer("the answer must be a JSON object with one property per question")
        for q in self.questions:
            name = q.spec.name
            if name in self.good:
                continue
            if name not in data:
                self.errors[name] = "missing"
                continue
            try:
                self.good[name] = q.parse(data[name])
            except MalformedAnswer as exc:
                self.errors[name] = str(exc)
            else:
                self.errors.pop(name, None)
        if self.errors:
            raise MalformedAnswer("; ".join(f"question {name!r}: {why}" for name, why in self.errors.items()))
        return self.good


def shares(usage: JudgeUsage, n: int) -> list[JudgeUsage]:
    """`usage` split into `n` equal shares (token remainders go to the first)."""

    def split(total: int) -> list[int]:
        base, rest = divmod(total, n)
        return [base + (1 if k < rest else 0) for k in range(n)]

    calls, hits = split(usage.calls), split(usage.cache_hits)
    inp, out, cached = split(usage.input_tokens), split(usage.output_tokens), split(usage.cached_input_tokens)
    return [JudgeUsage(calls[k], hits[k], inp[k], out[k], cached[k], usage.cost_usd / n) for k in range(n)]


async def ask_batch(questions: list[Question[Any]], thread: Thread, ctx: JudgeContext) -> dict[str, list[MetricResult]]:
    """Ask the questions in one request; results by metric name."""
    keep = frozenset().union(*(q.keep_turns for q in questions))
    rendered = ctx.transcripts.whole(keep)
    parts = Parts(questions)
    request = JudgeRequest(METRIC, rendered.text, instructions(questions), schema(questions), thread.key)
    failure: JudgeError | None = None
    try:
        _, usage = await ctx.judge.ask(request, parts)
    except JudgeError as exc:
        failure, usage = exc, exc.usage
    names = [q.spec.name for q in questions]
    out: dict[str, list[MetricResult]] = {}
    for q, share in zip(questions, shares(usage, len(questions)), strict=True):
        name = q.spec.name
        if name in parts.good:
            results = await q.finish(parts.good[name], share)
        else:
            why = (
                f"malformed answer after one corrective re-ask: {parts.errors[name]}"
                if name in parts.errors
                else str(failure)
            )
            results = [failed(q.spec, JudgeError(why), "judge failed")]
        settled = settle(results, share, rendered, ctx)
        for r in settled:
            r.evidence["batched_with"] = [n for n in names if n != name]
        out[name] = settled
    return out
