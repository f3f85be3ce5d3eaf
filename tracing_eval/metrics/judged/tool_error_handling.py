"""L9 `tool_error_handling`: when a tool call failed, did the assistant cope well?

Runs only on the turns where the deterministic `tool_errors` result found a failed call (taken
from `ctx.deterministic`, or computed here when the deterministic tier did not run). One judge
call per such turn, all at once; the request shows the system prompt and that turn only (its tool
calls, results and reply), never a later turn. The answer gives error types from eval_lib's
taxonomy, a reason, `handled` and a severity.

Score (higher is better): handled → 1.0 (label `handled`); otherwise by severity: low 0.7,
medium 0.3, high 0.0 (label = the severity); `none` with `handled: false` is a contradiction and
a parse error. The thread result is the mean over the judged turns, labelled with the worst one.
No tool calls → not_applicable; tool calls that all succeeded → skipped.

Reuse: `input_hash` is the hash of exactly what was sent; a prior result from `ctx.reuse` with
the same key, version and judge model is taken as is.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Self

from pydantic import AfterValidator, StrictBool, model_validator

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.answers import Answer, OneOf, Text, one_of
from tracing_eval.metrics.judged.base import JudgeContext, JudgeRequest, JudgeUsage, annotate, reuse_prior
from tracing_eval.metrics.judged.question import ask_turn, over_turns
from tracing_eval.metrics.judged.transcript import Rendered
from tracing_eval.metrics.results import not_applicable, ok, skipped
from tracing_eval.model import MetricResult, Scope, Status, Thread, Turn

ERROR_TYPES = (
    "parameter_error",
    "invalid_function",
    "sequence_error",
    "result_ignored",
    "repeated_failure",
    "error_handling",
)
#: score of an unhandled error by severity; a handled one scores 1.0
SEVERITY: dict[str, float] = {"none": 1.0, "low": 0.7, "medium": 0.3, "high": 0.0}
_RANK = {"handled": 0, "low": 1, "medium": 2, "high": 3}

INSTRUCTIONS = """\
TASK: tool error handling in turn {turn}, shown above with its tool calls; the assistant's final \
reply in it is {message}.
{findings}
Did the assistant handle the failed tool call(s) well? Good handling: fix the cause and retry, use \
another way, or tell the user plainly what failed and what they can do. Classify what went wrong \
with these types (an empty list if nothing did):
- parameter_error: missing, wrong or badly formatted arguments;
- invalid_function: a tool that does not exist or does not fit the task;
- sequence_error: calls in the wrong order or a needed step skipped;
- result_ignored: the reply disregards or misstates what a tool returned, e.g. claims success after a failure;
- repeated_failure: the same failing call retried without a change;
- error_handling: the failure is hidden from the user, or no recovery or next step is offered.
Severity is the harm to the user of how the error was handled: none, low, medium or high.
Answer in JSON: error_types, then reason (short), then handled, then severity."""


def _distinct_sorted(types: list[str]) -> list[str]:
    return sorted(set(types))


class Verdict(Answer):
    error_types: Annotated[list[Annotated[str, OneOf(ERROR_TYPES)]], AfterValidator(_distinct_sorted)]
    reason: Text
    handled: StrictBool
    severity: Annotated[str, one_of(SEVERITY)]

    @model_validator(mode="after")
    def _severity_of_unhandled(self) -> Self:
        if not self.handled and self.severity == "none":
            raise ValueError("an unhandled error needs a severity of low, medium or high")
        return self

    @property
    def score(self) -> float:
        return 1.0 if self.handled else SEVERITY[self.severity]

    @property
    def label(self) -> str:
        return "handled" if self.handled else self.severity


SCHEMA = Verdict.response_schema()
parse = Verdict.parser()


def findings_text(evidence: dict[str, Any]) -> str:
    """What the deterministic tier saw in this turn, as a hint for the judge."""
    notes = [f"{evidence.get('errors', 0)} of {evidence.get('tool_calls', 0)} call(s) failed"]
    if evidence.get("unrecovered"):
        at = ", ".join(f"[{p}]" for p in evidence["unrecovered"])
        notes.append(f"no successful retry of the call(s) at message {at}")
    if evidence.get("repeated_failure"):
        notes.append("the same failing call was repeated")
    if evidence.get("masked_error"):
        notes.append("the reply may claim success despite the error")
    return "Rule-based findings: " + "; ".join(notes) + "."


class ToolErrorHandling(MetricBase):
    """Per turn with a failed tool call: was the failure handled? Plus the thread's mean."""

    name = "tool_error_handling"
    version = "2"
    tier = "judge"
    scopes = ("turn", "thread")
    description = (
        "How well the assistant handled failed tool calls, on the turns where the deterministic tier found one."
    )

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        if not any(t.tool_calls for t in thread.turns):
            return [not_applicable(self.spec, "the thread has no tool calls")]
        found = [r for r in ctx.deterministic if r.metric == "tool_errors"] or ToolErrors().evaluate(thread)
        failing = {
            r.turn_index: r.evidence
            for r in found
            if r.scope == Scope.TURN and r.status == Status.OK and r.evidence.get("errors", 0) > 0
        }
        turns = [t for t in thread.turns if t.index in failing and t.index >= ctx.from_turn]
        if not turns:
            return [skipped(self.spec, "no tool errors found by the deterministic tier")]
        last_reply = {x.turn: x.position for x in replies(thread)}
        todo = [(t, *self._request(t, failing[t.index], last_reply.get(t.index), thread, ctx)) for t in turns]
        reused = {t.index: r for t, req, rendered in todo if (r := self._reused(t, req, rendered, ctx)) is not None}
        fresh = [item for item in todo if item[0].index not in reused]
        judged = await asyncio.gather(
            *(self._judge(t, failing[t.index], req, rendered, ctx) for t, req, rendered in fresh)
        )
        total = JudgeUsage()
        for _, usage in judged:
            total.add(usage)
        by_turn = reused | {t.index: r for (t, _, _), (r, _) in zip(fresh, judged, strict=True)}
        results = [by_turn[t.index] for t in turns]
        return [*results, self._thread_result(results, total, ctx)]

    def _request(
        self, turn: Turn, evidence: dict[str, Any], position: int | None, thread: Thread, ctx: JudgeContext
    ) -> tuple[JudgeRequest, Rendered]:
        """The system prompt and this turn only, and the question about it."""
        rendered = ctx.transcripts.window(turn.index, turn.index)
        instructions = INSTRUCTIONS.format(
            turn=turn.index,
            message="none (no reply with text)" if position is None else f"message [{position}]",
            findings=findings_text(evidence),
        )
        return JudgeRequest(self.name, rendered.text, instructions, SCHEMA, thread.key), rendered

    def _reused(self, turn: Turn, request: JudgeRequest, rendered: Rendered, ctx: JudgeContext) -> MetricResult | None:
        key = request.digest()
        prior = reuse_prior(self.spec, ctx.reuse.get((self.name, key)), key, ctx, turn.index)
        return None if prior is None else annotate(prior, rendered, ctx.transcripts.injection(turn.index, turn.index))

    async def _judge(
        self, turn: Turn, evidence: dict[str, Any], request: JudgeRequest, rendered: Rendered, ctx: JudgeContext
    ) -> tuple[MetricResult, JudgeUsage]:
        def result(verdict: Verdict) -> MetricResult:
            found = {
                "handled": verdict.handled,
                "error_types": verdict.error_types,
                "severity": verdict.severity,
                "failed_calls": evidence.get("failed_calls", []),
            }
            return ok(
                self.spec,
                verdict.score,
                turn_index=turn.index,
                label=verdict.label,
                reason=verdict.reason,
                evidence=found,
            )

        injection = ctx.transcripts.injection(turn.index, turn.index)
        return await ask_turn(self.spec, request, parse, result, rendered, injection, ctx, turn.index)

    def _thread_result(self, turns: list[MetricResult], usage: JudgeUsage, ctx: JudgeContext) -> MetricResult:
        def mean(judged: list[MetricResult], unjudged: list[int | None]) -> MetricResult:
            worst = max((r.label or "handled" for r in judged), key=lambda label: _RANK.get(label, 0))
            unhandled = [r.turn_index for r in judged if r.label != "handled"]
            reason = f"{len(judged) - len(unhandled)} of {len(judged)} turn(s) with tool errors handled well"
            if unjudged:
                reason += f"; {len(unjudged)} turn(s) could not be judged"
            scores = [r.score for r in judged if r.score is not None]
            evidence = {
                "judged_turns": len(judged),
                "unhandled_turns": unhandled,
                "unjudged_turns": unjudged,
                "error_types": sorted({t for r in judged for t in r.evidence.get("error_types", [])}),
                "reused_turns": [r.turn_index for r in judged if r.evidence.get("reused")],
            }
            return ok(self.spec, sum(scores) / len(scores), label=worst, reason=reason, evidence=evidence)

        return over_turns(self.spec, turns, usage, ctx, mean)
