"""Langfuse OTel attributes: `langfuse.session.id`, `langfuse.observation.type|input|output|level|
status_message|model.name|usage_details`, `langfuse.trace.input/output`.
"""

from __future__ import annotations

from tracing_eval.conventions.messages import payload_messages
from tracing_eval.conventions.values import as_int, as_str, loads, maybe_json
from tracing_eval.model import Message, Span, ToolCall

SESSION_ID = "langfuse.session.id"
TYPE = "langfuse.observation.type"
_KINDS = {
    "generation": "llm",
    "agent": "agent",
    "tool": "tool",
    "embedding": "other",
    "chain": "other",
    "retriever": "other",
    "guardrail": "other",
    "evaluator": "other",
}  # `span` and `event` are the SDK's generic defaults and decide nothing


def kind(span: Span) -> str | None:
    value = span.attributes.get(TYPE)
    if not isinstance(value, str):
        return None
    return _KINDS.get(value.strip().lower())


def observation_input(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("langfuse.observation.input"), output=False)


def observation_output(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("langfuse.observation.output"), output=True)


def trace_input(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("langfuse.trace.input"), output=False)


def trace_output(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("langfuse.trace.output"), output=True)


def error(span: Span) -> str | None:
    """`langfuse.observation.level=ERROR`, described by `langfuse.observation.status_message`."""
    level = span.attributes.get("langfuse.observation.level")
    if not isinstance(level, str) or level.strip().upper() != "ERROR":
        return None
    return as_str(span.attributes.get("langfuse.observation.status_message")) or "ERROR"


def model(span: Span) -> str | None:
    return as_str(span.attributes.get("langfuse.observation.model.name"))


def usage(span: Span) -> tuple[int | None, int | None]:
    """Input and output tokens from `langfuse.observation.usage_details` (JSON or structured)."""
    details = loads(span.attributes.get("langfuse.observation.usage_details"))
    if not isinstance(details, dict):
        return None, None
    tokens_in = as_int(details.get("input", details.get("prompt_tokens", details.get("input_tokens"))))
    tokens_out = as_int(details.get("output", details.get("completion_tokens", details.get("output_tokens"))))
    return tokens_in, tokens_out


def tool_call(span: Span) -> ToolCall | None:
    """The call a Langfuse `tool` observation made: its name, input and output."""
    if kind(span) != "tool":
        return None
    attrs = span.attributes
    return ToolCall(
        id=as_str(attrs.get("gen_ai.tool.call.id")),
        name=as_str(attrs.get("gen_ai.tool.name")) or span.name or "?",
        arguments=maybe_json(attrs.get("langfuse.observation.input")),
        result=maybe_json(attrs.get("langfuse.observation.output")),
        span_id=span.span_id,
    )
