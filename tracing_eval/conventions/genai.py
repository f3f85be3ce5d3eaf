"""OTel GenAI conventions: message attributes (>= 1.37), the inference details event, the legacy
per-message events (<= 1.36, content in the event body) and `execute_tool` spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracing_eval.conventions.messages import (
    converse_messages,
    openai_message,
    parts_messages,
    payload_messages,
    role_of,
)
from tracing_eval.conventions.values import as_int, as_str, content_text, loads, maybe_json, stored_items, text
from tracing_eval.model import Message, Span, SpanEvent, ToolCall

INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
CONVERSATION_ID = "gen_ai.conversation.id"
OPERATION = "gen_ai.operation.name"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
LEGACY_EVENTS = frozenset(
    {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice"}
)
_KINDS = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "completion": "llm",
    "generate": "llm",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "execute_tool": "tool",
}
#: not model calls; `execute_event_loop_cycle` is Strands' agent loop step, which repeats the input
#: messages of the `chat` spans inside it
_OTHER_OPERATIONS = frozenset(
    {"embeddings", "retrieval", "invoke_workflow", "plan", "fetch_response", "execute_event_loop_cycle"}
)


def kind(span: Span) -> str | None:
    """Span role from `gen_ai.operation.name`; unknown operations decide nothing."""
    op = span.attributes.get(OPERATION)
    if not isinstance(op, str):
        return None
    op = op.strip().lower()
    return _KINDS.get(op) or ("other" if op in _OTHER_OPERATIONS or op.endswith(("_memory", "_memory_store")) else None)


def has_content(span: Span) -> bool:
    """True when the span carries GenAI message content in any of this module's forms."""
    if INPUT in span.attributes or OUTPUT in span.attributes:
        return True
    return any(e.name == DETAILS_EVENT or e.name in LEGACY_EVENTS for e in span.events)


def finish_reasons(attrs: Mapping[str, Any]) -> list[str]:
    """`gen_ai.response.finish_reasons` as a list of strings (array, JSON string or single string)."""
    raw = maybe_json(attrs.get("gen_ai.response.finish_reasons"))
    if isinstance(raw, str):
        raw = [raw]
    return [r for r in (as_str(x) for x in raw) if r] if isinstance(raw, (list, tuple)) else []


def with_finish_reasons(messages: list[Message], reasons: list[str]) -> list[Message]:
    """Fill missing `finish_reason` of assistant outputs from the span's list, by position."""
    assistants = [m for m in messages if m.role == "assistant"]
    for i, m in enumerate(assistants):
        if m.finish_reason is None and reasons:
            m.finish_reason = reasons[min(i, len(reasons) - 1)]
    return messages


# --- gen_ai.input.messages / gen_ai.output.messages ---------------------------------------------


def _input(span: Span) -> Any:
    """`gen_ai.input.messages` as it reads: the items the store decodes from the messages of the thread
    it read back (`values.stored_items`), else the attribute as it is."""
    found = stored_items(span.attributes, INPUT)
    return span.attributes.get(INPUT) if found is None else found


def input_messages(span: Span) -> list[Message]:
    return parts_messages(_input(span))


def input_tail(span: Span) -> list[Message]:
    """`input_messages` cut to what a turn is assembled from (`messages.turn_tail`)."""
    return parts_messages(_input(span), tail=True)


def output_messages(span: Span) -> list[Message]:
    messages = parts_messages(span.attributes.get(OUTPUT), output=True)
    return with_finish_reasons(messages, finish_reasons(span.attributes)) if messages else messages


def system_instructions(span: Span) -> str | None:
    """Text of `gen_ai.system_instructions` (parts list, JSON string or plain text), span or details event."""
    for attrs in (span.attributes, *(_details_attributes(e) for e in _details_events(span))):
        value = attrs.get(SYSTEM)
        if value is None:
            continue
        parsed = maybe_json(value)
        found = text(parsed).strip() if isinstance(parsed, (str, list, dict)) else ""
        if found:
            return found
    return None


# --- gen_ai.client.inference.operation.details ---------------------------------------------------


def _details_events(span: Span) -> list[SpanEvent]:
    return [e for e in span.events if e.name == DETAILS_EVENT]


def _details_attributes(event: SpanEvent) -> dict[str, Any]:
    attrs = dict(event.attributes) if isinstance(event.attributes, dict) else {}
    body = loads(event.body) if isinstance(event.body, str) else event.body
    if isinstance(body, dict):
        for key in (INPUT, OUTPUT, SYSTEM):
            attrs.setdefault(key, body.get(key))
    return attrs


def details_input(span: Span) -> list[Message]:
    for event in _details_events(span):
        found = parts_messages(_details_attributes(event).get(INPUT))
        if found:
            return found
    return []


def details_output(span: Span) -> list[Message]:
    for event in _details_events(span):
        attrs = _details_attributes(event)
        found = parts_messages(attrs.get(OUTPUT), output=True)
        if found:
            return with_finish_reasons(found, finish_reasons(span.attributes) or finish_reasons(attrs))
    return []


# --- legacy per-message events ------------------------------------------------------------------


def _event_body(event: SpanEvent) -> dict[str, Any]:
    body = event.body
    if isinstance(body, str):
        parsed = loads(body)
        body = parsed if isinstance(parsed, dict) else {"content": body}
    if isinstance(body, dict) and body:
        return body
    attrs = event.attributes if isinstance(event.attributes, dict) else {}
    return {k: v for k, v in attrs.items() if k in _BODY_KEYS}


_BODY_KEYS = frozenset({"content", "role", "tool_calls", "id", "message", "index", "finish_reason"})


def _sorted_events(span: Span, names: frozenset[str] | set[str]) -> list[SpanEvent]:
    found = [e for e in span.events if e.name in names]
    return sorted(found, key=lambda e: e.time_ns if isinstance(e.time_ns, int) else 0)


def legacy_input(span: Span) -> list[Message]:
    """`gen_ai.{system,user,assistant,tool}.message` events (or a `gen_ai.content.prompt` event)."""
    if not span.events:
        return []
    out: list[Message] = []
    for event in _sorted_events(span, LEGACY_EVENTS - {"gen_ai.choice"}):
        body = _event_body(event)
        role = role_of(event.name.split(".")[1])
        blocks = converse_messages(role, body.get("content")) if role is not None else None
        if blocks is not None:  # Strands: Bedrock Converse content blocks
            out.extend(blocks)
        elif role == "assistant":
            out.extend(openai_message({**body, "role": "assistant"}))
        elif role == "tool":
            call_id = body.get("id") or body.get("tool_call_id")
            out.append(Message(role="tool", content=content_text(body.get("content")), tool_call_id=as_str(call_id)))
        elif role is not None:
            out.append(Message(role=role, content=content_text(body.get("content"))))
    if not out:
        for event in _sorted_events(span, {"gen_ai.content.prompt"}):
            out.extend(payload_messages(event.attributes.get("gen_ai.prompt"), output=False))
    return out


def _choice_messages(body: dict[str, Any]) -> list[Message]:
    """One `gen_ai.choice`: `message` an OpenAI message object, or (Strands) Converse content blocks
    or plain text as a string."""
    message, finish = body.get("message"), body.get("finish_reason")
    if isinstance(message, dict):
        return openai_message({"role": "assistant", **message}, output=True, finish_reason=finish)
    blocks = converse_messages("assistant", message)
    if blocks is None:
        blocks = [Message(role="assistant", content=message.strip())] if isinstance(message, str) else []
    for m in blocks:
        m.finish_reason = as_str(finish)
    return blocks or openai_message({"role": "assistant"}, output=True, finish_reason=finish)


def legacy_output(span: Span) -> list[Message]:
    """`gen_ai.choice` events in index order (or a `gen_ai.content.completion` event)."""
    if not span.events:
        return []
    choices: list[tuple[int, list[Message]]] = []
    for n, event in enumerate(_sorted_events(span, {"gen_ai.choice"})):
        body = _event_body(event)
        index = as_int(body.get("index"))
        choices.append((n if index is None else index, _choice_messages(body)))
    out = [m for _, msgs in sorted(choices, key=lambda c: c[0]) for m in msgs]
    if not out:
        for event in _sorted_events(span, {"gen_ai.content.completion"}):
            out.extend(payload_messages(event.attributes.get("gen_ai.completion"), output=True))
    return with_finish_reasons(out, finish_reasons(span.attributes))


# --- execute_tool --------------------------------------------------------------------------------


def tool_call(span: Span) -> ToolCall | None:
    """The call an `execute_tool` span (or any span with `gen_ai.tool.*`) made."""
    attrs = span.attributes
    name = as_str(attrs.get("gen_ai.tool.name"))
    if name is None and kind(span) != "tool":
        return None
    if name is None:
        name = span.name.removeprefix("execute_tool").strip() or None
    arguments, result = attrs.get("gen_ai.tool.call.arguments"), attrs.get("gen_ai.tool.call.result")
    if arguments is None and result is None:
        arguments, result = _tool_events(span)
    return ToolCall(
        id=as_str(attrs.get("gen_ai.tool.call.id")),
        name=name or "?",
        arguments=maybe_json(arguments),
        result=maybe_json(result),
        span_id=span.span_id,
    )


def _tool_events(span: Span) -> tuple[Any, Any]:
    """Arguments and result of a tool span that reports them as events (Strands): the
    `gen_ai.tool.message` content and the `gen_ai.choice` message (text blocks as text)."""
    arguments = result = None
    for event in _sorted_events(span, {"gen_ai.tool.message", "gen_ai.choice"}):
        body = _event_body(event)
        if event.name == "gen_ai.tool.message":
            arguments = body.get("content")
        else:
            blocks = converse_messages("tool", body.get("message"))
            result = "\n".join(m.content for m in blocks) if blocks is not None else body.get("message")
    return arguments, result
