"""`conversational_flow` (L7): does the conversation flow? One holistic judge call, V5+.

Flow is a property of the sequence, so the judge gives one verdict for the whole thread instead
of per-turn scores that an average would dilute. Needs at least two exchanges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.judged.base import (
    V5_PLUS,
    JudgeContext,
    JudgeError,
    JudgeRequest,
    judge_error,
    label_of,
    strings_of,
    text_of,
    verdict_schema,
    with_usage,
)
from tracing_eval.model import MetricResult, Scope, Thread, not_applicable, score_result

NAME = "conversational_flow"
VERSION = "1"

SCHEMA = verdict_schema(V5_PLUS, "key_issues")

INSTRUCTIONS = """\
TASK: rate the flow of the conversation: does the assistant pick up the user's signals turn after \
turn and keep the exchange coherent and moving?
Verdicts:
- fully: natural and coherent; it responds to the user's signals in every turn; no needless clarifying questions.
- mostly: smooth, with small awkwardness (one redundant clarification, a slightly off tone).
- partial: noticeable friction (several missed signals or awkward transitions), but the conversation progresses.
- minor: frequent redundant clarifications, misread intent or awkward jumps that make the user repeat themselves.
- none: broken: it ignores the user's signals, drifts into irrelevant tangents, contradicts earlier turns \
or blocks progress.
Rules:
- Judge the conversation as a whole, not as an average of turns: one badly broken turn pulls the verdict down.
- Later turns weigh more than earlier ones.
- Length, verbosity and politeness earn nothing.

Answer in JSON: verdict; key_issues: the problems found, each with its message numbers [n] (empty if none); \
reason: one or two sentences."""


@dataclass(frozen=True)
class Answer:
    verdict: str
    key_issues: list[str]
    reason: str


def parse(data: Any) -> Answer:
    return Answer(label_of(data, "verdict", V5_PLUS), strings_of(data, "key_issues"), text_of(data, "reason"))


class ConversationalFlow(MetricBase):
    """Thread-scope holistic conversational flow (V5+)."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("thread",)
    default_threshold = 0.7
    description = "The conversation flows: user signals followed, coherent, no needless detours (judge, V5+)."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        answered = [t for t in thread.turns if any(m.content.strip() or m.tool_calls for m in t.assistant_messages)]
        if len(answered) < 2:
            return [not_applicable(NAME, "fewer than two exchanges with an assistant reply", version=VERSION)]
        request = JudgeRequest(NAME, ctx.transcript, INSTRUCTIONS, SCHEMA, thread_key=thread.key)
        try:
            answer, usage = await ctx.judge.ask(request, parse)
        except JudgeError as exc:
            return [judge_error(self.spec, exc)]
        result = score_result(
            NAME,
            V5_PLUS[answer.verdict],
            threshold=self.spec.threshold,
            scope=Scope.THREAD,
            label=answer.verdict,
            reason=answer.reason,
            evidence={"verdict": answer.verdict, "key_issues": answer.key_issues},
            version=VERSION,
        )
        return [with_usage(result, usage, ctx.judge.model)]
