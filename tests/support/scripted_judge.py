"""A judge for tests of judged metrics: the real `JudgeClient` and `openai` client against the fake
OpenAI server on loopback, answering from a script per metric.

    judge = ScriptedJudge({"failure_rate": [{"verdict": "stall", "evidence": [], "reason": "vague"}]})
    [result] = await FailureRate().evaluate(thread, judge_context(thread, judge))
    judge.requests  # every request the server received, in order, re-asks included

The server finds the metric from the request's `json_schema` name and answers with the next
scripted answer for it: a dict or list is sent as JSON, a string as is, a `Reply` as given (e.g.
`Reply.failure(500, "down")`), an exception as an HTTP 500 with its message. Instead of a list,
a metric's script may be a function of the request body that returns the answer. A batched request
(`thread_metrics`) gets one scripted answer per metric it asks about, in one JSON object. The
client re-asks once on a malformed answer, exactly as in production; a request with no answer
left is a 500 and is recorded in `judge.dry`. Usage is what the server counted (one token per word
and punctuation mark); compare results with `judge.sent(...)` figures, not constants.
`close_judges()` (an autouse fixture in conftest) stops every server and client after each test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.support.fakes.openai_server import FakeOpenAIServer, Json, Reply
from tracing_eval.config import JudgeSettings
from tracing_eval.judge import JudgeClient, schema_name
from tracing_eval.metrics.judged.base import JudgeContext, JudgeRequest, JudgeUsage
from tracing_eval.metrics.judged.batch import METRIC as BATCH
from tracing_eval.metrics.judged.question import Question
from tracing_eval.metrics.judged.transcript import Limits, Transcripts
from tracing_eval.model import MetricResult, Thread
from tracing_eval.transcripts import thread_from_messages

T = TypeVar("T")
OPEN: list[ScriptedJudge] = []


@dataclass(frozen=True)
class Sent:
    """One request as the server received it."""

    metric: str
    system: str
    transcript: str | None
    instructions: str
    schema: Mapping[str, Any]
    body: Json
    usage: Json | None

    @property
    def reask(self) -> bool:
        return any(m.get("role") == "assistant" for m in self.body["messages"])


class ScriptedJudge:
    """A `Judge`: a real `JudgeClient` against a scripted fake OpenAI server."""

    def __init__(self, answers: dict[str, Any], model: str = "fake-judge", **settings: Any) -> None:
        self.answers = {metric: script if callable(script) else list(script) for metric, script in answers.items()}
        self._names = {schema_name(metric): metric for metric in answers}
        self.dry: list[str] = []
        self.server = FakeOpenAIServer(self._answer, models=(model,)).start()
        options: dict[str, Any] = {"max_retries": 0, "cache": False, "batch_thread_metrics": False, **settings}
        self.settings = JudgeSettings(model=model, base_url=self.server.base_url, api_key="test", **options)
        self.model = model
        self._client: JudgeClient | None = None
        OPEN.append(self)

    @property
    def client(self) -> JudgeClient:
        if self._client is None:  # made in the test's event loop
            self._client = JudgeClient(self.settings, retry_base_seconds=0.01, retry_cap_seconds=0.05)
        return self._client

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        return await self.client.ask(request, parse)

    def for_thread(self, thread_key: str) -> Any:
        return self.client.for_thread(thread_key)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        self.server.stop()

    # -- the server side ------------------------------------------------------------------------

    def _metric(self, body: Json) -> str:
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        return BATCH if name == BATCH else self._names.get(name, name)

    def _next(self, metric: str, body: Json) -> Any:
        script = self.answers.get(metric)
        if callable(script):
            return script(body)
        if not script:
            self.dry.append(metric)
            raise LookupError(f"no scripted answer left for {metric!r}")
        return script.pop(0)

    def _answer(self, body: Json) -> Reply:
        metric = self._metric(body)
        if metric == BATCH:
            schema = body["response_format"]["json_schema"]["schema"]
            answer: Any = {name: self._next(name, body) for name in schema["properties"]}
        else:
            answer = self._next(metric, body)
        if isinstance(answer, Reply):
            return answer
        if isinstance(answer, BaseException):
            return Reply.failure(500, str(answer))
        return Reply(answer if isinstance(answer, str) else json.dumps(answer))

    # -- what was sent --------------------------------------------------------------------------

    @property
    def requests(self) -> list[Sent]:
        out = []
        for e in self.server.requests:
            if e.body is None or e.path != "/v1/chat/completions":
                continue
            messages = e.body["messages"]
            with_transcript = len(messages) >= 3 and messages[2]["role"] == "user"
            fmt = e.body.get("response_format") or {}
            out.append(
                Sent(
                    metric=self._metric(e.body),
                    system=messages[0]["content"],
                    transcript=messages[1]["content"] if with_transcript else None,
                    instructions=messages[2 if with_transcript else 1]["content"],
                    schema=(fmt.get("json_schema") or {}).get("schema", {}),
                    body=e.body,
                    usage=e.usage,
                )
            )
        return out

    def requests_for(self, metric: str) -> list[Sent]:
        return [r for r in self.requests if r.metric == metric]

    def unused(self) -> dict[str, list[Any]]:
        """Scripted answers nobody asked for (assert it is empty to check the call count)."""
        return {metric: script for metric, script in self.answers.items() if script and not callable(script)}

    def billed(self, requests: list[Sent] | None = None) -> tuple[int, int]:
        """(input, output) tokens the server counted over `requests` (default: all)."""
        chosen = self.requests if requests is None else requests
        return (
            sum((r.usage or {}).get("prompt_tokens", 0) for r in chosen),
            sum((r.usage or {}).get("completion_tokens", 0) for r in chosen),
        )


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
    reuse: dict[tuple[str, str], MetricResult] | None = None,
    limits: Limits | None = None,
) -> JudgeContext:
    """A JudgeContext over the thread, as the judged tier builds it."""
    return JudgeContext(
        judge=judge,
        transcripts=Transcripts(thread, limits),
        deterministic=deterministic or [],
        options=options or {},
        reuse=reuse or {},
    )


def question_of(metric: Any, thread: Thread, **context: Any) -> Question[Any]:
    """The question a thread metric would ask about `thread` (no call is made)."""
    found = metric.question(thread, judge_context(thread, ScriptedJudge({}), **context))
    assert isinstance(found, Question), found
    return found


def strict_schema_problems(schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Where a JSON schema breaks OpenAI strict mode: objects must list every property as required
    and forbid additional ones. Returns human-readable problems (empty when fine)."""
    problems: list[str] = []
    if schema.get("type") == "object":
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties must be false")
        if list(schema.get("required", [])) != list(props):
            problems.append(f"{path}: required must list every property")
        for key, sub in props.items():
            problems += strict_schema_problems(sub, f"{path}.{key}")
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        problems += strict_schema_problems(schema["items"], f"{path}[]")
    for option in schema.get("anyOf", []):
        problems += strict_schema_problems(option, f"{path}|")
    return problems


def verdict_last(schema: Mapping[str, Any]) -> bool:
    """Whether every object that has a verdict-like field asks for it after its reason and evidence."""
    if schema.get("type") == "object":
        keys = list(schema.get("properties", {}))
        decided = [k for k in keys if k in ("verdict", "status", "score", "handled", "severity")]
        if decided and "reason" in keys and keys.index("reason") > min(keys.index(k) for k in decided):
            return False
        return all(verdict_last(sub) for sub in schema.get("properties", {}).values())
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        return verdict_last(schema["items"])
    return True
