"""OpenInference (Arize): flattened `llm.input_messages.N.message.*` / `llm.output_messages.N.*`,
`openinference.span.kind`, generic `input.value` / `output.value`, and TOOL spans (`tool.*`).
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

from tracing_eval.conventions.messages import payload_messages, role_of, turn_tail
from tracing_eval.conventions.messages import tool_call as make_tool_call
from tracing_eval.conventions.values import as_str, content_text, has_prefix, indexed, maybe_json, text
from tracing_eval.model import Message, Span, ToolCall

KIND = "openinference.span.kind"
INPUT_PREFIX = "llm.input_messages."
OUTPUT_PREFIX = "llm.output_messages."
_ROLE_VALUE = methodcaller("get", "message.role")
_KINDS = {"LLM": "llm", "TOOL": "tool", "AGENT": "agent"}


def kind(span: Span) -> str | None:
    """`LLM`/`TOOL`/`AGENT` map to their role; any other declared kind (CHAIN, RETRIEVER, ...) is `other`."""
    value = span.attributes.get(KIND)
    if not isinstance(value, str) or not value.strip():
        return None
    return _KINDS.get(value.strip().upper(), "other")


def has_content(span: Span) -> bool:
    return has_prefix(span.attributes, INPUT_PREFIX) or has_prefix(span.attributes, OUTPUT_PREFIX)


def _message(fields: dict[str, Any], *, output: bool) -> Message | None:
    role = role_of(fields.get("message.role"), "assistant" if output else None)
    if role is None:
        return None
    content = fields.get("message.content")
    if content is None:
        parts = indexed(fields, "message.contents.")
        content = "\n".join(
            text(p.get("message_content.text"))
            for p in parts
            if p.get("message_content.type", "text") == "text" and p.get("message_content.text") is not None
        )
    if role == "tool":
        call_id = as_str(fields.get("message.tool_call_id"))
        return Message(role="tool", content=content_text(content), tool_call_id=call_id)
    if role != "assistant":
        return Message(role=role, content=content_text(content))
    calls = [
        make_tool_call(
            tc.get("tool_call.id"), tc.get("tool_call.function.name"), tc.get("tool_call.function.arguments")
        )
        for tc in indexed(fields, "message.tool_calls.")
    ]
    return Message(role="assistant", content=content_text(content), tool_calls=calls)


def _messages(span: Span, prefix: str, *, output: bool, tail: bool = False) -> list[Message]:
    groups = indexed(span.attributes, prefix)
    if tail:
        groups = turn_tail(groups, _ROLE_VALUE, "assistant" if output else None)
    found = (_message(fields, output=output) for fields in groups)
    return [m for m in found if m is not None]


def input_messages(span: Span) -> list[Message]:
    return _messages(span, INPUT_PREFIX, output=False)


def input_tail(span: Span) -> list[Message]:
    """`input_messages` cut to what a turn is assembled from (`messages.turn_tail`)."""
    return _messages(span, INPUT_PREFIX, output=False, tail=True)


def output_messages(span: Span) -> list[Message]:
    out = _messages(span, OUTPUT_PREFIX, output=True)
    reason = as_str(span.attributes.get("llm.finish_reason"))
    if reason and out and out[-1].role == "assistant" and out[-1].finish_reason is None:
        out[-1].finish_reason = reason
    return out


def value_input(span: Span) -> list[Message]:
    """`input.value`: the request JSON on LLM spans, the user's input on CHAIN/AGENT roots."""
    return payload_messages(span.attributes.get("input.value"), output=False)


def value_output(span: Span) -> list[Message]:
    """`output.value`: the response JSON on LLM spans, the final answer on CHAIN/AGENT roots."""
    return payload_messages(span.attributes.get("output.value"), output=True)


def response_id(span: Span) -> str | None:
    """The `id` of a chat-completion / Responses API JSON in `output.value`."""
    raw = span.attributes.get("output.value")
    data = maybe_json(raw) if isinstance(raw, str) and raw.lstrip().startswith("{") else None
    if isinstance(data, dict) and ("choices" in data or "output" in data):
        return as_str(data.get("id"))
    return None


def tool_call(span: Span) -> ToolCall | None:
    """The call a TOOL span made: `tool.name`, `tool.id`, arguments in `input.value`, result in `output.value`."""
    if kind(span) != "tool":
        return None
    attrs = span.attributes
    arguments = attrs.get("input.value", attrs.get("tool_call.function.arguments"))
    return ToolCall(
        id=as_str(attrs.get("tool.id")) or as_str(attrs.get("tool_call.id")),
        name=as_str(attrs.get("tool.name")) or as_str(attrs.get("tool_call.function.name")) or span.name or "?",
        arguments=maybe_json(arguments),
        result=maybe_json(attrs.get("output.value")),
        span_id=span.span_id,
    )
