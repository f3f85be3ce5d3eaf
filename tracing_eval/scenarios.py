"""Scenarios: failed production threads as test cases that `simulate` plays against a bot.

A scenario holds the user's goal, a persona line drawn from how the user behaved, why the thread
failed (metric, label, reason, evidence), a turn limit and a stop condition, and the original
transcript for reference. Its id is stable (derived from the conversation id), so exporting the same
failure twice, from the store or from Langfuse, adds nothing.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tracing_eval.metrics.deterministic.user_friction import UserFriction
from tracing_eval.metrics.judged import task_success
from tracing_eval.metrics.judged.base import Judge, JudgeError, JudgeRequest
from tracing_eval.metrics.judged.transcript import Limits, render_thread
from tracing_eval.model import MetricResult, Status, Thread
from tracing_eval.transcripts import thread_to_messages

#: Namespace of scenario ids (uuid5 of the conversation id).
SCENARIO_NAMESPACE = uuid.UUID("3c6f2f1e-8d0a-5b7e-9f3a-6e1d2c4b5a70")
GoalSource = Literal["task_success", "judge", "first_user_message"]
#: An identifier: 4+ letters, digits and hyphens with a digit among the first 64 (looked for that far
#: only, so "a-b-c-..." is not scanned to its end from each of its words).
_IDENTIFIER = re.compile(r"\b(?=[A-Za-z0-9-]{0,63}\d)[A-Za-z0-9-]{4,}\b")
_HUMAN = re.compile(r"\b(?:human|person|agent|representative|manager|supervisor)\b", re.I)
MAX_GOAL_CHARS = 300
STOP_CONDITION = (
    "Stop when the assistant has done what the user wanted, or when the user would give up: the assistant "
    "cannot help, or fails the same way twice."
)


class ScenarioError(ValueError):
    """A scenario file or line that cannot be used; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Failure(_Model):
    """Why the source thread failed: one metric's verdict on the thread or a turn."""

    metric: str
    target: str = "thread"
    score: float | None = None
    label: str | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)

    @property
    def summary(self) -> str:
        verdict = self.label or ("-" if self.score is None else f"{self.score:.2f}")
        return f"{self.metric} {verdict} on {self.target}"


class Scenario(_Model):
    """One test case for `simulate`; the line format of `scenarios export --format scenarios`."""

    id: str
    goal: str
    goal_source: GoalSource
    criteria: list[str] = Field(default_factory=list)
    persona: str
    expected_outcome: str
    failures: list[Failure] = Field(default_factory=list)
    max_turns: int = Field(gt=0)
    stop_condition: str
    system_prompt: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    transcript: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def user_messages(self) -> list[str]:
        """The original user's messages, in order (what the replay user says)."""
        return [str(m.get("content") or "") for m in self.transcript if m.get("role") == "user"]


@dataclass
class FailedThread:
    """A thread that failed, with every stored result (for the goal) and the failures that select it."""

    thread: Thread
    failures: list[Failure]
    results: list[MetricResult] = field(default_factory=list)
    origin: dict[str, Any] = field(default_factory=dict)


def scenario_id(thread: Thread) -> str:
    """Stable id from the conversation id, the same whichever source the thread came from."""
    conversation = thread.conversation_id or thread.key.partition(":")[2] or thread.key
    return "scn-" + uuid.uuid5(SCENARIO_NAMESPACE, conversation).hex[:16]


def failure_of(result: MetricResult) -> Failure:
    target = "thread" if result.turn_index is None else f"turn:{result.turn_index}"
    return Failure(
        metric=result.metric,
        target=target,
        score=result.score,
        label=result.label,
        reason=result.reason,
        evidence=result.evidence,
    )


def failing(results: Iterable[MetricResult], metrics: Iterable[str] = (), labels: Iterable[str] = ()) -> list[Failure]:
    """Results that failed (or carry one of `labels`), limited to `metrics` when given."""
    wanted, marked = set(metrics), set(labels)
    out = []
    for r in results:
        if r.status is not Status.OK or (wanted and r.metric not in wanted):
            continue
        if (r.passed is False and not marked) or (r.label is not None and r.label in marked):
            out.append(failure_of(r))
    return out


# -- goal and persona ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Goal:
    text: str
    source: GoalSource
    criteria: tuple[str, ...] = ()


def first_request(thread: Thread) -> str:
    text = next((t.user_text.strip() for t in thread.turns if t.user_text.strip()), "")
    text = " ".join(text.split())
    return text if len(text) <= MAX_GOAL_CHARS else text[: MAX_GOAL_CHARS - 1] + "…"


def known_goal(results: Iterable[MetricResult]) -> Goal | None:
    """The goal (and criteria) `task_success` already inferred, from its evidence."""
    for r in results:
        task = r.evidence.get("task_description") if r.metric == "task_success" else None
        if isinstance(task, str) and task.strip():
            criteria = r.evidence.get("success_criteria") or []
            return Goal(task.strip(), "task_success", tuple(str(c) for c in criteria if isinstance(c, str)))
    return None


async def infer_goal(thread: Thread, judge: Judge) -> Goal:
    """Ask the judge for the user's goal, as `task_success` does (its first step)."""
    transcript = render_thread(thread, Limits(budget_tokens=judge.settings.transcript_budget)).text
    step = task_success.Goal
    request = JudgeRequest(
        "task_success", transcript, task_success.GOAL_INSTRUCTIONS, step.response_schema(), thread.key
    )
    answer, _ = await judge.ask(request, step.parser())
    return Goal(answer.goal, "judge")


async def goal_of(failed: FailedThread, judge: Judge | None) -> Goal:
    """Known from `task_success`; else inferred by the judge when there is one; else the first request."""
    known = known_goal(failed.results)
    if known is not None:
        return known
    if judge is not None:
        try:
            return await infer_goal(failed.thread, judge)
        except JudgeError:
            pass  # the first request still describes the goal
    return Goal(first_request(failed.thread), "first_user_message")


def persona_line(thread: Thread) -> str:
    """How this user behaved, in one line: message length, details up front, friction signals."""
    users = [t.user_text for t in thread.turns if t.user_text.strip()]
    if not users:
        return "A user who says nothing."
    words = round(fmean(len(u.split()) for u in users))
    parts = [
        f"writes {'short' if words <= 12 else 'detailed' if words >= 40 else 'medium-length'} messages "
        f"(about {words} words)"
    ]
    parts.append(
        "gives order numbers or other identifiers up front"
        if _IDENTIFIER.search(users[0])
        else "does not volunteer identifiers until asked"
    )
    flags = [
        f
        for result in UserFriction().evaluate(thread)
        if result.turn_index is not None
        for f in result.evidence.get("flags", [])
    ]
    if "repeat" in flags:
        parts.append("repeats the request when it is not handled")
    if "frustration" in flags:
        parts.append("shows frustration when the assistant does not help")
    if "shouting" in flags:
        parts.append("writes in capitals when annoyed")
    if any(_HUMAN.search(u) for u in users[1:]):
        parts.append("asks for a human when stuck")
    parts.append(f"stayed for {len(users)} message(s)")
    return "A user who " + "; ".join(parts) + "."


def expected_outcome(goal: Goal, failures: list[Failure]) -> str:
    wanted = "; ".join(goal.criteria) if goal.criteria else f"the user's goal is met ({goal.text})"
    avoided = ", ".join(sorted({f.metric for f in failures}))
    return f"By the end of the conversation {wanted}" + (
        f", without the failures seen in production ({avoided})." if avoided else "."
    )


def build_scenario(failed: FailedThread, goal: Goal, max_turns: int | None = None) -> Scenario:
    """The scenario of one failed thread (pure)."""
    thread = failed.thread
    user_turns = sum(1 for t in thread.turns if t.user_text.strip())
    return Scenario(
        id=scenario_id(thread),
        goal=goal.text,
        goal_source=goal.source,
        criteria=list(goal.criteria),
        persona=persona_line(thread),
        expected_outcome=expected_outcome(goal, failed.failures),
        failures=failed.failures,
        max_turns=max_turns or max(3, user_turns + 2),
        stop_condition=STOP_CONDITION,
        system_prompt=thread.system_prompt,
        source={"thread_key": thread.key, "thread_version": thread.version, **failed.origin},
        transcript=thread_to_messages(thread),
    )


def read_scenarios(data: bytes, name: str) -> list[Scenario]:
    """Scenario JSON lines; a bad line is an error naming the file and line."""
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Scenario.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{name} line {n}: not valid JSON ({exc})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            raise ScenarioError(
                f"{name} line {n}: not a scenario ({where}: {first['msg']}); write one with `tracing-eval scenarios export`"
            ) from None
    return out


async def scenarios_from(
    failed: list[FailedThread], judge: Judge | None = None, max_turns: int | None = None
) -> list[Scenario]:
    """Scenarios of failed threads, goals inferred concurrently (the judge paces its calls)."""
    goals = await asyncio.gather(*(goal_of(f, judge) for f in failed))
    return [build_scenario(f, g, max_turns) for f, g in zip(failed, goals, strict=True)]
