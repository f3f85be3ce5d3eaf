"""OpenLLMetry / Traceloop (<= 0.55): flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`,
`traceloop.span.kind`, `traceloop.entity.input/output`. From 0.56 it emits the GenAI attributes.
"""

from __future__ import annotations

from typing import Any

from tracing_eval.conventions.messages import payload_messages, role_of
from tracing_eval.conventions.messages import tool_call as make_tool_call
from tracing_eval.conventions.values import as_str, content_text, has_prefix, indexed, maybe_json
from tracing_eval.model import Message, Span, ToolCall

KIND = "traceloop.span.kind"
SESSION_ID = "traceloop.association.properties.session_id"
PROMPT_PREFIX = "gen_ai.prompt."
COMPLETION_PREFIX = "gen_ai.completion."
_KINDS = {"tool": "tool", "agent": "agent", "workflow": "other", "task": "other"}


def kind(span: Span) -> str | None:
    """`traceloop.span.kind`, or `llm` for instrumented model calls (`llm.request.type`)."""
    value = span.attributes.get(KIND)
    if isinstance(value, str) and value.strip().lower() in _KINDS:
        return _KINDS[value.strip().lower()]
    request_type = span.attributes.get("llm.request.type")
    if isinstance(request_type, str) and request_type.strip().lower() in ("chat", "completion"):
        return "llm"
    return None


def has_content(span: Span) -> bool:
    return has_prefix(span.attributes, PROMPT_PREFIX) or has_prefix(span.attributes, COMPLETION_PREFIX)


def _message(fields: dict[str, Any], *, output: bool) -> Message | None:
    role = role_of(fields.get("role"), "assistant" if output else None)
    if role is None:
        return None
    content = content_text(fields.get("content"))
    if role == "tool":
        return Message(role="tool", content=content, tool_call_id=as_str(fields.get("tool_call_id")))
    if role != "assistant":
        return Message(role=role, content=content)
    calls = [
        make_tool_call(
            tc.get("id"), tc.get("name", tc.get("function.name")), tc.get("arguments", tc.get("function.arguments"))
        )
        for tc in indexed(fields, "tool_calls.")
    ]
    if "function_call.name" in fields:
        calls.append(make_tool_call(None, fields.get("function_call.name"), fields.get("function_call.arguments")))
    finish = as_str(fields.get("finish_reason"))
    return Message(role="assistant", content=content, tool_calls=calls, finish_reason=finish)


def _messages(span: Span, prefix: str, *, output: bool) -> list[Message]:
    found = (_message(fields, output=output) for fields in indexed(span.attributes, prefix))
    return [m for m in found if m is not None]


def input_messages(span: Span) -> list[Message]:
    return _messages(span, PROMPT_PREFIX, output=False)


def output_messages(span: Span) -> list[Message]:
    return _messages(span, COMPLETION_PREFIX, output=True)


def entity_input(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("traceloop.entity.input"), output=False)


def entity_output(span: Span) -> list[Message]:
    return payload_messages(span.attributes.get("traceloop.entity.output"), output=True)


def _arguments(raw: Any) -> Any:
    """Decorated-function input `{"args": [...], "kwargs": {...}}` as the call's arguments."""
    data = maybe_json(raw)
    if isinstance(data, dict) and set(data) <= {"args", "kwargs"}:
        args, kwargs = data.get("args") or [], data.get("kwargs") or {}
        if not args:
            return kwargs
        if not kwargs:
            return args
    return data


def tool_call(span: Span) -> ToolCall | None:
    """The call a `traceloop.span.kind=tool` span made (entity name, input and output)."""
    if span.attributes.get(KIND) != "tool":
        return None
    attrs = span.attributes
    name = as_str(attrs.get("traceloop.entity.name")) or span.name.removesuffix(".tool") or "?"
    return ToolCall(
        id=as_str(attrs.get("gen_ai.tool.call.id")),
        name=name,
        arguments=_arguments(attrs.get("traceloop.entity.input")),
        result=maybe_json(attrs.get("traceloop.entity.output")),
        span_id=span.span_id,
    )
