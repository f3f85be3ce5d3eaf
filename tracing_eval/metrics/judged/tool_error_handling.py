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
from dataclasses import dataclass
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.metrics.judged.base import (
    JudgeContext,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    MalformedAnswer,
    annotate,
    judge_error,
    label_of,
    reuse_prior,
    skipped,
    strict_object,
    text_of,
    with_usage,
)
from tracing_eval.metrics.judged.transcript import Rendered
from tracing_eval.model import MetricResult, Scope, Status, Thread, Turn, not_applicable, score_result

NAME = "tool_error_handling"
VERSION = "2"
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

SCHEMA: dict[str, Any] = strict_object(
    {
        "error_types": {"type": "array", "items": {"type": "string", "enum": list(ERROR_TYPES)}},
        "reason": {"type": "string"},
        "handled": {"type": "boolean"},
        "severity": {"type": "string", "enum": list(SEVERITY)},
    }
)


@dataclass(frozen=True)
class Verdict:
    handled: bool
    error_types: list[str]
    severity: str
    reason: str

    @property
    def score(self) -> float:
        return 1.0 if self.handled else SEVERITY[self.severity]

    @property
    def label(self) -> str:
        return "handled" if self.handled else self.severity


def parse(data: Any) -> Verdict:
    severity = label_of(data, "severity", SEVERITY)
    handled = data.get("handled")
    if not isinstance(handled, bool):
        raise MalformedAnswer(f"'handled' must be true or false; got {handled!r}")
    if not handled and severity == "none":
        raise MalformedAnswer("an unhandled error needs a severity of low, medium or high")
    types = data.get("error_types")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise MalformedAnswer("'error_types' must be a list of strings")
    unknown = [t for t in types if t.strip().lower() not in ERROR_TYPES]
    if unknown:
        raise MalformedAnswer(f"unknown error types {unknown}; known: {', '.join(ERROR_TYPES)}")
    return Verdict(handled, sorted({t.strip().lower() for t in types}), severity, text_of(data, "reason"))


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

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("turn", "thread")
    description = (
        "How well the assistant handled failed tool calls, on the turns where the deterministic tier found one."
    )

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        if not any(t.tool_calls for t in thread.turns):
            return [not_applicable(NAME, "the thread has no tool calls", version=VERSION)]
        found = [r for r in ctx.deterministic if r.metric == "tool_errors"] or ToolErrors().evaluate(thread)
        failing = {
            r.turn_index: r.evidence
            for r in found
            if r.scope == Scope.TURN and r.status == Status.OK and r.evidence.get("errors", 0) > 0
        }
        turns = [t for t in thread.turns if t.index in failing]
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

    @staticmethod
    def _request(
        turn: Turn, evidence: dict[str, Any], position: int | None, thread: Thread, ctx: JudgeContext
    ) -> tuple[JudgeRequest, Rendered]:
        """The system prompt and this turn only, and the question about it."""
        rendered = ctx.transcripts.window(turn.index, turn.index)
        instructions = INSTRUCTIONS.format(
            turn=turn.index,
            message="none (no reply with text)" if position is None else f"message [{position}]",
            findings=findings_text(evidence),
        )
        return JudgeRequest(NAME, rendered.text, instructions, SCHEMA, thread.key), rendered

    def _reused(self, turn: Turn, request: JudgeRequest, rendered: Rendered, ctx: JudgeContext) -> MetricResult | None:
        key = request.digest()
        prior = reuse_prior(self.spec, ctx.reuse.get((NAME, key)), key, ctx, turn.index)
        return None if prior is None else annotate(prior, rendered, ctx.transcripts.injection(turn.index, turn.index))

    async def _judge(
        self, turn: Turn, evidence: dict[str, Any], request: JudgeRequest, rendered: Rendered, ctx: JudgeContext
    ) -> tuple[MetricResult, JudgeUsage]:
        try:
            verdict, usage = await ctx.judge.ask(request, parse)
        except JudgeError as exc:
            return judge_error(self.spec, exc, turn_index=turn.index), exc.usage
        result = score_result(
            NAME,
            verdict.score,
            threshold=self.spec.threshold,
            scope=Scope.TURN,
            turn_index=turn.index,
            label=verdict.label,
            reason=verdict.reason,
            evidence={
                "handled": verdict.handled,
                "error_types": verdict.error_types,
                "severity": verdict.severity,
                "failed_calls": evidence.get("failed_calls", []),
            },
            version=VERSION,
        )
        result.input_hash = request.digest()
        injection = ctx.transcripts.injection(turn.index, turn.index)
        return annotate(with_usage(result, usage, ctx.judge.model), rendered, injection), usage

    def _thread_result(self, turns: list[MetricResult], usage: JudgeUsage, ctx: JudgeContext) -> MetricResult:
        ok = [r for r in turns if r.status == Status.OK]
        failed = [r.turn_index for r in turns if r.status != Status.OK]
        if not ok:
            result = judge_error(self.spec, JudgeError(f"no turn could be judged ({len(failed)} failed)"))
            return with_usage(result, usage, ctx.judge.model)
        worst = max((r.label or "handled" for r in ok), key=lambda label: _RANK.get(label, 0))
        unhandled = [r.turn_index for r in ok if r.label != "handled"]
        reason = f"{len(ok) - len(unhandled)} of {len(ok)} turn(s) with tool errors handled well"
        if failed:
            reason += f"; {len(failed)} turn(s) could not be judged"
        scores = [r.score for r in ok if r.score is not None]
        result = score_result(
            NAME,
            sum(scores) / len(scores),
            threshold=self.spec.threshold,
            label=worst,
            reason=reason,
            evidence={
                "judged_turns": len(ok),
                "unhandled_turns": unhandled,
                "unjudged_turns": failed,
                "error_types": sorted({t for r in ok for t in r.evidence.get("error_types", [])}),
                "reused_turns": [r.turn_index for r in ok if r.evidence.get("reused")],
            },
            version=VERSION,
        )
        return with_usage(result, usage, ctx.judge.model)
