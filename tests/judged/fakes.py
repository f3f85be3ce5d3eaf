"""An in-process judge for tests of judged metrics: scripted answers per metric, no network.

    judge = ScriptedJudge({"failure_rate": [{"verdict": "stall", "evidence": [], "reason": "vague"}]})
    [result] = await FailureRate().evaluate(thread, judge_context(thread, judge))
    judge.requests  # every JudgeRequest sent, in order, re-asks included

`ask` takes the next answer scripted for `request.metric` and runs the metric's `parse` on it, as
the real client does with the decoded JSON. On MalformedAnswer it re-asks once (the next scripted
answer for that metric; both attempts are recorded and billed); a second MalformedAnswer raises
JudgeError. An exception in the script is raised as is (e.g. `JudgeError("timeout")`). Running out
of answers is a test bug and fails with AssertionError. Every attempt costs `usage_per_call`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tracing_eval.metrics.judged.base import JudgeContext, JudgeError, JudgeRequest, JudgeUsage, MalformedAnswer
from tracing_eval.metrics.judged.transcript import render_transcript
from tracing_eval.model import MetricResult, Thread
from tracing_eval.transcripts import thread_from_messages

T = TypeVar("T")

#: Usage billed per attempt unless a test passes its own.
DEFAULT_USAGE = JudgeUsage(calls=1, input_tokens=100, output_tokens=20, cached_input_tokens=0, cost_usd=0.001)


class ScriptedJudge:
    """A `Judge` that replays scripted answers per metric name and records what it was asked."""

    def __init__(
        self, answers: dict[str, list[Any]], model: str = "fake-judge", *, usage_per_call: JudgeUsage = DEFAULT_USAGE
    ) -> None:
        self.model = model
        self.answers = {metric: list(script) for metric, script in answers.items()}
        self.usage_per_call = usage_per_call
        self.requests: list[JudgeRequest] = []

    @property
    def usage(self) -> JudgeUsage:
        """Everything billed so far (the pipeline logs a thread's usage)."""
        total = JudgeUsage()
        for _ in self.requests:
            total.add(self.usage_per_call)
        return total

    def for_thread(self, thread_key: str) -> ScriptedJudge:
        """The pipeline asks for a per-thread view; the fake has no budgets, so it is itself."""
        return self

    def requests_for(self, metric: str) -> list[JudgeRequest]:
        return [r for r in self.requests if r.metric == metric]

    def unused(self) -> dict[str, list[Any]]:
        """Scripted answers nobody asked for (assert it is empty to check the call count)."""
        return {metric: script for metric, script in self.answers.items() if script}

    def _next(self, request: JudgeRequest) -> Any:
        self.requests.append(request)
        script = self.answers.get(request.metric)
        if not script:
            raise AssertionError(f"ScriptedJudge: no answer left for {request.metric!r} (call {len(self.requests)})")
        answer = script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        usage = JudgeUsage()
        for attempt in (1, 2):
            answer = self._next(request)
            usage.add(dataclasses.replace(self.usage_per_call))
            try:
                return parse(answer), usage
            except MalformedAnswer as exc:
                if attempt == 2:
                    raise JudgeError(f"malformed answer after a re-ask: {exc}") from exc
        raise AssertionError("unreachable")


def chat(*texts: str, system: str | None = None, metadata: dict[str, Any] | None = None) -> Thread:
    """A thread of alternating user/assistant messages, starting with the user."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return thread_from_messages("t", msgs, metadata=metadata)


def judge_context(
    thread: Thread,
    judge: ScriptedJudge,
    *,
    deterministic: list[MetricResult] | None = None,
    options: dict[str, Any] | None = None,
) -> JudgeContext:
    """A JudgeContext with the thread's rendered transcript."""
    return JudgeContext(
        judge=judge, transcript=render_transcript(thread), deterministic=deterministic or [], options=options or {}
    )


def strict_schema_problems(schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Where a JSON schema breaks OpenAI strict mode: objects must list every property as required
    and forbid additional ones. Returns human-readable problems (empty when fine)."""
    problems: list[str] = []
    if schema.get("type") == "object":
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties must be false")
        if set(schema.get("required", [])) != set(props):
            problems.append(f"{path}: required must list every property")
        for key, sub in props.items():
            problems += strict_schema_problems(sub, f"{path}.{key}")
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        problems += strict_schema_problems(schema["items"], f"{path}[]")
    return problems
