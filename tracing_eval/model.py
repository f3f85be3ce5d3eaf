"""Canonical types shared by every part of the engine.

Spans come in from any source and convention; everything after normalisation works on
`Thread` / `Turn` / `Message` and produces `MetricResult`. Nothing here knows a vendor API.
"""

from __future__ import annotations

import hashlib
import uuid
from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]

#: Namespace of the deterministic ids every sink uses for results (uuid5).
RESULT_NAMESPACE = uuid.UUID("6f1c0a52-3f0e-5d7b-9a4e-2b8c6d1e7f90")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpanEvent(_Model):
    """A span event or an OTLP log record joined to its span (same thing, per OTEP 4430)."""

    name: str
    time_ns: int = 0
    attributes: dict[str, Any] = Field(default_factory=dict)
    body: Any = None


class Span(_Model):
    """One span as received, with ids as lowercase hex."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str = ""
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    status: Literal["unset", "ok", "error"] = "unset"
    status_message: str = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    resource: dict[str, Any] = Field(default_factory=dict)
    scope: str = ""


class ToolCall(_Model):
    """A tool invocation requested by the assistant, with its outcome when known."""

    id: str | None = None
    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None
    span_id: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


class Message(_Model):
    """One chat message. `position` is its 0-based index in the thread transcript."""

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    finish_reason: str | None = None
    position: int | None = None


class Unreadable(_Model):
    """Content that was there but could not be read: where it was looked for and what that span had.

    `reason` is `unknown_answer` (a turn whose answer no convention could read) or `no_turn` (a trace
    with spans but no turn). `attributes` are the attribute and event names seen, so the missing
    convention can be recognised (`tracing-eval inspect` shows the rest).
    """

    reason: Literal["unknown_answer", "no_turn"]
    trace_id: str | None = None
    span_id: str | None = None
    span_name: str = ""
    spans: int = 1  # how many spans were looked at
    attributes: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        what = "the answer could not be read" if self.reason == "unknown_answer" else "no turn could be read"
        names = ", ".join(self.attributes[:20]) + (", ..." if len(self.attributes) > 20 else "")
        return f"{what} from span {self.span_name or '?'!r} ({self.span_id or '?'}); attributes seen: {names or 'none'}"


class Turn(_Model):
    """One user request and everything the assistant did to answer it (one trace root).

    `answer_unknown` is set when the answer could not be read: the turn then holds no assistant
    answer, and metrics that need one are `not_applicable` for it (unknown is not empty).
    """

    index: int
    messages: list[Message] = Field(default_factory=list)
    trace_id: str | None = None
    root_span_id: str | None = None
    response_id: str | None = None
    model: str | None = None
    started_ns: int = 0
    ended_ns: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None
    answer_unknown: Unreadable | None = None

    @property
    def user_text(self) -> str:
        return "\n".join(m.content for m in self.messages if m.role == "user" and m.content)

    @property
    def assistant_messages(self) -> list[Message]:
        return [m for m in self.messages if m.role == "assistant"]

    @property
    def assistant_text(self) -> str:
        """The answer the user saw: the last assistant message with text."""
        for m in reversed(self.messages):
            if m.role == "assistant" and m.content:
                return m.content
        return ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [tc for m in self.messages if m.role == "assistant" for tc in m.tool_calls]

    @property
    def finish_reason(self) -> str | None:
        for m in reversed(self.messages):
            if m.role == "assistant":
                return m.finish_reason
        return None

    @property
    def content_hash(self) -> str:
        """Stable hash of what the turn said and did; unchanged turns keep their results."""
        payload = [m.model_dump(exclude={"position"}) for m in self.messages]
        return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


class Thread(_Model):
    """A conversation: ordered turns that share a conversation id (or one trace)."""

    key: str
    source: str = "otlp"
    conversation_id: str | None = None
    system_prompt: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    version: int = 1
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: traces of the thread that had spans but yielded no turn
    unreadable: list[Unreadable] = Field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        """The transcript in order (system prompt excluded unless it was a message)."""
        return [m for t in self.turns for m in t.messages]


class Scope(StrEnum):
    TURN = "turn"
    WINDOW = "window"
    THREAD = "thread"


class Status(StrEnum):
    OK = "ok"
    SKIPPED = "skipped"
    NOT_APPLICABLE = "not_applicable"
    ERROR = "error"


class MetricResult(_Model):
    """One metric's verdict on one target. Scores are in [0, 1], higher is better."""

    metric: str
    metric_version: str = "1"
    scope: Scope
    turn_index: int | None = None
    score: float | None = None
    label: str | None = None
    passed: bool | None = None
    threshold: float | None = None
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    status: Status = Status.OK
    error: str | None = None
    judge_model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    input_hash: str | None = None  # hash of what a judged result looked at; equal hash -> reusable

    def target(self, thread: Thread | None = None) -> str:
        """`thread`, or the turn: its trace id when known (stable as turns are added), else its index."""
        if self.turn_index is None:
            return "thread"
        if thread is not None and self.turn_index < len(thread.turns) and thread.turns[self.turn_index].trace_id:
            return f"trace:{thread.turns[self.turn_index].trace_id}"
        return f"turn:{self.turn_index}"

    def contract(self) -> dict[str, Any]:
        """The fields of the public `eval` / `results` JSON contract."""
        return {
            "score": self.score,
            "label": self.label,
            "passed": self.passed,
            "status": self.status.value,
            "reason": self.reason,
            "evidence": self.evidence,
        }


def result_id(thread_key: str, target: str, metric: str) -> str:
    """Deterministic id: the same target and metric always map to the same id on every replica."""
    return str(uuid.uuid5(RESULT_NAMESPACE, f"{thread_key}|{target}|{metric}"))
