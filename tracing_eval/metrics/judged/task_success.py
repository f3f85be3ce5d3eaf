"""`task_success` (seed 001, L1): did the assistant get the user to their goal? V5+ per criterion.

Steps, each one judge call: infer the user's goal in one sentence, derive one or two success
criteria from it, then judge every criterion on the V5+ scale at the end of the conversation; the
verdict weights are combined with `score_agg` at `temperature` (default 0.5). eval_lib's fourth
call, a summary, is dropped (L1): the reason is built from the verdicts' own reasons.

A `task_description` skips the goal step and `success_criteria` the criteria step; they come from
the thread's metadata (an `eval` input line may carry them) or else this metric's options (config).
So a thread costs 3 calls, 2 with one of them given, 1 with both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracing_eval.metrics.base import MetricBase, MetricSpec
from tracing_eval.metrics.judged.aggregate import DEFAULT_TEMPERATURE, score_agg
from tracing_eval.metrics.judged.base import (
    V5_PLUS,
    JudgeContext,
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    MalformedAnswer,
    judge_error,
    label_of,
    with_usage,
)
from tracing_eval.model import MetricResult, Scope, Status, Thread, not_applicable, score_result

NAME = "task_success"
VERSION = "1"
USER_PROVIDED = "user_provided"
LLM_INFERRED = "llm_inferred"
MAX_CRITERIA = 2

GOAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"goal": {"type": "string"}},
    "required": ["goal"],
    "additionalProperties": False,
}
CRITERIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"criteria": {"type": "array", "items": {"type": "string"}}},
    "required": ["criteria"],
    "additionalProperties": False,
}
VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": list(V5_PLUS)}, "reason": {"type": "string"}},
                "required": ["verdict", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}

GOAL_INSTRUCTIONS = """\
TASK: state the user's primary goal in this conversation in ONE concise sentence: what the user \
wanted to achieve, not what the assistant did.
Answer in JSON: goal."""

CRITERIA_INSTRUCTIONS = """\
User's goal: {goal}

TASK: write the success criteria for this goal: checkable statements about the outcome the user \
needed, derived from the goal rather than from what the assistant happened to do. Use as few as \
possible: one, and a second only when the goal has two clearly distinct parts. Do not judge yet.
Answer in JSON: criteria (a list of 1 or 2 strings)."""

VERDICT_INSTRUCTIONS = """\
User's goal: {goal}
Success criteria:
{criteria}

TASK: for each criterion, judge how well it is met by the END of the conversation.
- fully: completely met.
- mostly: met, with a small gap or imprecision.
- partial: partly met; a significant part is missing or wrong.
- minor: barely addressed; only a small part is met.
- none: not met, wrong, or not addressed.
Answer in JSON: verdicts, a list of exactly {n} items in the order of the criteria, each with \
verdict and reason (one sentence)."""


class OptionError(ValueError):
    """A `task_description`, `success_criteria` or `temperature` value that cannot be used."""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str


def parse_goal(data: Any) -> str:
    goal = data.get("goal") if isinstance(data, dict) else None
    if not isinstance(goal, str) or not goal.strip():
        raise MalformedAnswer("'goal' must be a non-empty string")
    return goal.strip()


def parse_criteria(data: Any) -> list[str]:
    criteria = data.get("criteria") if isinstance(data, dict) else None
    if not isinstance(criteria, list) or not all(isinstance(c, str) and c.strip() for c in criteria):
        raise MalformedAnswer("'criteria' must be a list of non-empty strings")
    if not 1 <= len(criteria) <= MAX_CRITERIA:
        raise MalformedAnswer(f"expected 1 to {MAX_CRITERIA} criteria, got {len(criteria)}")
    return [c.strip() for c in criteria]


def verdicts_parser(n: int) -> Callable[[Any], list[Verdict]]:
    """A parser for exactly `n` verdicts; any other length is malformed (never padded)."""

    def parse(data: Any) -> list[Verdict]:
        items = data.get("verdicts") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise MalformedAnswer("'verdicts' must be a list")
        if len(items) != n:
            raise MalformedAnswer(f"expected {n} verdicts, one per criterion, got {len(items)}")
        out = []
        for item in items:
            reason = item.get("reason") if isinstance(item, dict) else None
            verdict = label_of(item, "verdict", V5_PLUS)
            if not isinstance(reason, str):
                raise MalformedAnswer("every verdict needs a 'reason' string")
            out.append(Verdict(verdict, reason.strip()))
        return out

    return parse


def _given(thread: Thread, ctx: JudgeContext, key: str) -> Any:
    """The thread's own value (metadata), else the configured option; blanks count as absent."""
    for source in (thread.metadata, ctx.options):
        value = source.get(key)
        if value not in (None, "", []):
            return value
    return None


def given_task(thread: Thread, ctx: JudgeContext) -> str | None:
    value = _given(thread, ctx, "task_description")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"task_description must be a non-empty string, got {value!r}")
    return value.strip()


def given_criteria(thread: Thread, ctx: JudgeContext) -> list[str] | None:
    value = _given(thread, ctx, "success_criteria")
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
        raise OptionError(f"success_criteria must be a list of non-empty strings, got {value!r}")
    return [c.strip() for c in value]


def temperature_option(ctx: JudgeContext) -> float:
    value = ctx.options.get("temperature", DEFAULT_TEMPERATURE)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise OptionError(f"temperature must be a number >= 0, got {value!r}")
    return float(value)


def option_error(spec: MetricSpec, exc: OptionError) -> MetricResult:
    return MetricResult(
        metric=spec.name,
        metric_version=spec.version,
        scope=Scope.THREAD,
        status=Status.ERROR,
        error=f"{type(exc).__name__}: {exc}",
        reason=f"invalid option: {exc}",
        threshold=spec.threshold,
    )


def summary(verdicts: list[Verdict]) -> str:
    """The result's reason: the verdicts' reasons, numbered like the criteria."""
    return " ".join(f"{i}. {v.verdict}: {v.reason}" for i, v in enumerate(verdicts, 1))


class TaskSuccess(MetricBase):
    """Thread-scope task success: goal, criteria, V5+ verdicts, `score_agg`."""

    name = NAME
    version = VERSION
    tier = "judge"
    scopes = ("thread",)
    default_threshold = 0.7
    description = "The assistant achieved the user's goal, judged per success criterion (judge, V5+, score_agg)."

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        if not any(t.user_text.strip() for t in thread.turns):
            return [not_applicable(NAME, "no user message", version=VERSION)]
        if not any(m.role == "assistant" and (m.content.strip() or m.tool_calls) for m in thread.messages):
            return [not_applicable(NAME, "no assistant reply", version=VERSION)]
        try:
            task, criteria, temperature = given_task(thread, ctx), given_criteria(thread, ctx), temperature_option(ctx)
        except OptionError as exc:
            return [option_error(self.spec, exc)]
        task_source = USER_PROVIDED if task is not None else LLM_INFERRED
        criteria_source = USER_PROVIDED if criteria is not None else LLM_INFERRED
        usage = JudgeUsage()

        async def ask(instructions: str, schema: dict[str, Any], parse: Callable[[Any], Any]) -> Any:
            request = JudgeRequest(NAME, ctx.transcript, instructions, schema, thread_key=thread.key)
            value, used = await ctx.judge.ask(request, parse)
            usage.add(used)
            return value

        try:
            if task is None:
                task = await ask(GOAL_INSTRUCTIONS, GOAL_SCHEMA, parse_goal)
            if criteria is None:
                criteria = await ask(CRITERIA_INSTRUCTIONS.format(goal=task), CRITERIA_SCHEMA, parse_criteria)
            numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(criteria, 1))
            prompt = VERDICT_INSTRUCTIONS.format(goal=task, criteria=numbered, n=len(criteria))
            verdicts = await ask(prompt, VERDICTS_SCHEMA, verdicts_parser(len(criteria)))
        except JudgeError as exc:
            return [with_usage(judge_error(self.spec, exc), usage, ctx.judge.model)]

        weights = [V5_PLUS[v.verdict] for v in verdicts]
        evidence = {
            "task_description": task,
            "task_description_source": task_source,
            "success_criteria": criteria,
            "success_criteria_source": criteria_source,
            "verdicts": [
                {"criterion": c, "verdict": v.verdict, "weight": w, "reason": v.reason}
                for c, v, w in zip(criteria, verdicts, weights, strict=True)
            ],
            "temperature": temperature,
        }
        result = score_result(
            NAME,
            score_agg(weights, temperature),
            threshold=self.spec.threshold,
            scope=Scope.THREAD,
            reason=summary(verdicts),
            evidence=evidence,
            version=VERSION,
        )
        return [with_usage(result, usage, ctx.judge.model)]
