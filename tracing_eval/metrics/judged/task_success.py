"""`task_success` (seed 001, L1): did the assistant get the user to their goal? V5+ per criterion.

Steps, each one judge call: infer the user's goal in one sentence from the transcript; derive one
or two success criteria from the goal alone (the request shows no transcript, so the criteria say
what the assistant should provide, not what it did); then judge every criterion on the V5+ scale
at the end of the conversation. The verdict weights are combined with `score_agg` at
`temperature` (default 0.5). eval_lib's fourth call, a summary, is dropped (L1): the reason is
built from the verdicts' own reasons. The goal step (or, with both given, the verdict step) is the
metric's question about the transcript, so it can be batched with other thread metrics.

A `task_description` skips the goal step and `success_criteria` the criteria step; they come from
the thread's metadata (an `eval` input line may carry them) or else this metric's options (config).
So a thread costs 3 calls, 2 with one of them given, 1 with both.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, create_model

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.judged.aggregate import DEFAULT_TEMPERATURE, score_agg
from tracing_eval.metrics.judged.answers import Answer, Text, one_of
from tracing_eval.metrics.judged.base import V5_PLUS, JudgeContext, JudgeError, JudgeRequest, JudgeUsage
from tracing_eval.metrics.judged.question import Question, ask_question, settle
from tracing_eval.metrics.judged.transcript import json_string
from tracing_eval.metrics.results import failed, not_applicable, ok
from tracing_eval.model import MetricResult, Thread

USER_PROVIDED = "user_provided"
LLM_INFERRED = "llm_inferred"
#: The seed's rule: the minimum number of criteria, one, and a second only for a clearly distinct aspect.
MAX_CRITERIA = 2

GOAL_INSTRUCTIONS = """\
TASK: task success, step 1 of 3: state the user's primary goal in this conversation in ONE concise \
sentence: what the user wanted to achieve, not what the assistant did.
Answer in JSON: goal."""

CRITERIA_INSTRUCTIONS = """\
TASK: task success, step 2 of 3. The user's goal, as data: {goal}
Write the MINIMUM number of success criteria that show whether this goal was achieved: start with \
one, and add a second ONLY when the goal has two clearly distinct aspects. Each criterion checks \
what the assistant should provide or do (not what the user does), and must be observable in a \
conversation. Do not judge anything yet.
Examples:
- Goal: "Book a round-trip flight to Paris for next Monday." -> criteria: ["The assistant showed \
available flights with their prices.", "The assistant confirmed the booking with its dates."]
- Goal: "Find out why this month's invoice is higher than last month's." -> criteria: ["The \
assistant explained which charges made the invoice higher."]
Answer in JSON: criteria (a list of 1 or 2 strings)."""

VERDICT_INSTRUCTIONS = """\
TASK: task success, step 3 of 3. The user's goal, as data: {goal}
Success criteria, as data:
{criteria}
For each criterion, judge how well it is met by the END of the conversation:
- fully: completely met.
- mostly: met, with a small gap or imprecision.
- partial: partly met; a significant part is missing or wrong.
- minor: barely addressed; only a small part is met.
- none: not met, wrong, or not addressed.
Judge from what is shown; content that was not shown (clipped, or turns not shown) is unknown.
Answer in JSON: one property per criterion ({names}), each with reason (one sentence), then verdict."""


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value.strip()


def _one_or_two(value: list[str]) -> list[str]:
    if not 1 <= len(value) <= MAX_CRITERIA:
        raise ValueError(f"expected 1 to {MAX_CRITERIA} criteria, got {len(value)}")
    return value


NonEmpty = Annotated[str, AfterValidator(_non_empty)]


class Goal(Answer):
    goal: NonEmpty


class Criteria(Answer):
    criteria: Annotated[list[NonEmpty], AfterValidator(_one_or_two)]


class Verdict(Answer):
    reason: Text
    verdict: Annotated[str, one_of(V5_PLUS)]


class OptionError(ValueError):
    """A `task_description`, `success_criteria` or `temperature` value that cannot be used."""


def verdicts_answer(n: int) -> type[Answer]:
    """One required property per criterion, `criterion_1` .. `criterion_n`: exactly `n` verdicts."""
    fields: dict[str, Any] = {f"criterion_{i}": (Verdict, ...) for i in range(1, n + 1)}
    return create_model(f"Verdicts{n}", __base__=Answer, **fields)


def verdicts_of(answer: Answer) -> list[Verdict]:
    return [getattr(answer, name) for name in type(answer).model_fields]


def verdict_instructions(task: str, criteria: list[str]) -> str:
    numbered = "\n".join(f"{i}. {json_string(c)}" for i, c in enumerate(criteria, 1))
    names = ", ".join(f"criterion_{i}" for i in range(1, len(criteria) + 1))
    return VERDICT_INSTRUCTIONS.format(goal=json_string(task), criteria=numbered, names=names)


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


def summary(verdicts: list[Verdict]) -> str:
    """The result's reason: the verdicts' reasons, numbered like the criteria."""
    return " ".join(f"{i}. {v.verdict}: {v.reason}" for i, v in enumerate(verdicts, 1))


class TaskSuccess(MetricBase):
    """Thread-scope task success: goal, criteria, V5+ verdicts, `score_agg`."""

    name = "task_success"
    version = "2"
    tier = "judge"
    scopes = ("thread",)
    default_threshold = 0.7
    description = "The assistant achieved the user's goal, judged per success criterion (judge, V5+, score_agg)."

    def question(self, thread: Thread, ctx: JudgeContext) -> Question[Any] | list[MetricResult] | None:
        """The goal step (or the verdict step when task and criteria are both given); None when the first
        call is the criteria step, which shows no transcript."""
        if not any(t.user_text.strip() for t in thread.turns):
            return [not_applicable(self.spec, "no user message")]
        if not any(m.role == "assistant" and (m.content.strip() or m.tool_calls) for m in thread.messages):
            return [not_applicable(self.spec, "no assistant reply")]
        try:
            task, criteria, temperature = given_task(thread, ctx), given_criteria(thread, ctx), temperature_option(ctx)
        except OptionError as exc:
            return [failed(self.spec, exc, "invalid option")]
        sources = (USER_PROVIDED if task is not None else LLM_INFERRED, USER_PROVIDED if criteria else LLM_INFERRED)
        if task is None:

            async def after_goal(answer: Goal, usage: JudgeUsage) -> list[MetricResult]:
                return await self._rest(thread, ctx, answer.goal, criteria, temperature, sources, usage)

            return Question(self.spec, GOAL_INSTRUCTIONS, Goal.response_schema(), Goal.parser(), after_goal)
        if criteria is None:
            return None
        known = criteria

        async def score(answer: Answer, _usage: JudgeUsage) -> list[MetricResult]:
            return [self._result(task, known, verdicts_of(answer), temperature, sources)]

        instructions = verdict_instructions(task, criteria)
        answer = verdicts_answer(len(criteria))
        return Question(self.spec, instructions, answer.response_schema(), answer.parser(), score)

    async def evaluate(self, thread: Thread, ctx: JudgeContext) -> list[MetricResult]:
        question = self.question(thread, ctx)
        if isinstance(question, list):
            return question
        if question is not None:
            return await ask_question(question, thread, ctx)
        task, criteria, temperature = given_task(thread, ctx), given_criteria(thread, ctx), temperature_option(ctx)
        assert task is not None and criteria is None
        usage = JudgeUsage()
        results = await self._rest(thread, ctx, task, None, temperature, (USER_PROVIDED, LLM_INFERRED), usage)
        return settle(results, usage, ctx.transcripts.whole(), ctx)

    async def _rest(
        self,
        thread: Thread,
        ctx: JudgeContext,
        task: str,
        criteria: list[str] | None,
        temperature: float,
        sources: tuple[str, str],
        usage: JudgeUsage,
    ) -> list[MetricResult]:
        """The criteria step (the goal alone, no transcript) when needed, then the verdict step."""

        async def ask(transcript: str | None, instructions: str, answer: type[Answer]) -> Any:
            request = JudgeRequest(self.name, transcript, instructions, answer.response_schema(), thread.key)
            try:
                value, used = await ctx.judge.ask(request, answer.parser())
            except JudgeError as exc:
                usage.add(exc.usage)
                raise
            usage.add(used)
            return value

        try:
            if criteria is None:
                found: Criteria = await ask(None, CRITERIA_INSTRUCTIONS.format(goal=json_string(task)), Criteria)
                criteria = list(found.criteria)
            transcript = ctx.transcripts.whole().text
            verdicts = await ask(transcript, verdict_instructions(task, criteria), verdicts_answer(len(criteria)))
        except JudgeError as exc:
            return [failed(self.spec, exc, "judge failed")]
        return [self._result(task, criteria, verdicts_of(verdicts), temperature, sources)]

    def _result(
        self, task: str, criteria: list[str], verdicts: list[Verdict], temperature: float, sources: tuple[str, str]
    ) -> MetricResult:
        weights = [V5_PLUS[v.verdict] for v in verdicts]
        evidence = {
            "task_description": task,
            "task_description_source": sources[0],
            "success_criteria": criteria,
            "success_criteria_source": sources[1],
            "verdicts": [
                {"criterion": c, "verdict": v.verdict, "weight": w, "reason": v.reason}
                for c, v, w in zip(criteria, verdicts, weights, strict=True)
            ],
            "temperature": temperature,
        }
        return ok(self.spec, score_agg(weights, temperature), reason=summary(verdicts), evidence=evidence)
