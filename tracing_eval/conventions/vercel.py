"""Vercel AI SDK (`ai`, `experimental_telemetry`): `ai.*` span attributes.

- `ai.generateText` / `ai.streamText` / `ai.generateObject` / `ai.streamObject`: one call of the
  SDK (possibly several model steps): `ai.prompt` (`{"system", "messages"}` or `{"prompt"}`),
  `ai.response.text`, `ai.response.toolCalls`.
- `*.doGenerate` / `*.doStream`: one model call: `ai.prompt.messages`, `ai.response.text`,
  `ai.response.toolCalls` (`[{"toolCallId", "toolName", "input"}]`; `args` before AI SDK 5),
  `ai.response.finishReason`.
- `ai.toolCall`: `ai.toolCall.name`, `.id`, `.args`, `.result` (JSON text).
- The conversation id is `ai.telemetry.metadata.sessionId` (the key Langfuse documents for the SDK).

Message parts: `{"type": "text", "text"}`, `{"type": "tool-call", "toolCallId", "toolName",
"input"|"args"}`, and in `tool` messages `{"type": "tool-result", "toolCallId", "output":
{"type": "text"|"json", "value"}}` (`result` before AI SDK 5).
"""

from __future__ import annotations

from typing import Any

from tracing_eval.conventions.messages import role_of
from tracing_eval.conventions.messages import tool_call as make_tool_call
from tracing_eval.conventions.values import as_str, loads, maybe_json, result_text, text
from tracing_eval.model import Message, Span, ToolCall

OPERATION = "ai.operationId"
SESSION_ID = "ai.telemetry.metadata.sessionId"
_CALLS = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")


def _operation(span: Span) -> str | None:
    op = span.attributes.get(OPERATION)
    return op if isinstance(op, str) and op.startswith("ai.") else None


def kind(span: Span) -> str | None:
    """`*.doGenerate` / `*.doStream` are the model calls, `ai.toolCall` the tools, the SDK calls agents."""
    op = _operation(span)
    if op is None:
        return None
    if op.endswith((".doGenerate", ".doStream")):
        return "llm"
    if op == "ai.toolCall":
        return "tool"
    if op in _CALLS:
        return "agent"
    return "other"  # embeddings and anything newer


def _part_messages(role: str, content: Any) -> list[Message]:
    """One SDK message (`content` a string or a list of parts) as canonical messages."""
    canonical = role_of(role)
    if canonical is None:
        return []
    if not isinstance(content, list):
        return [Message(role=canonical, content=text(content))]
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind_ = part.get("type")
        if kind_ == "text":
            texts.append(text(part.get("text")))
        elif kind_ == "tool-call":
            arguments = part["input"] if "input" in part else part.get("args")
            calls.append(make_tool_call(part.get("toolCallId"), part.get("toolName"), arguments))
        elif kind_ == "tool-result":
            results.append(Message(role="tool", content=_result(part), tool_call_id=as_str(part.get("toolCallId"))))
    if canonical == "tool":
        return results
    joined = "\n".join(t for t in texts if t)
    return [Message(role=canonical, content=joined, tool_calls=calls if canonical == "assistant" else [])]


def _result(part: dict[str, Any]) -> str:
    """A tool result part's value: `output: {"type", "value"}` (AI SDK 5+) or `result` (earlier)."""
    output = part.get("output")
    if isinstance(output, dict) and "value" in output:
        return result_text(output["value"])
    return result_text(output if output is not None else part.get("result"))


def _messages(value: Any) -> list[Message]:
    items = loads(value)
    if not isinstance(items, list):
        return []
    out: list[Message] = []
    for item in items:
        if isinstance(item, dict):
            out.extend(_part_messages(str(item.get("role", "")), item.get("content")))
    return out


def input_messages(span: Span) -> list[Message]:
    """`ai.prompt.messages` (a model call), else `ai.prompt` (`{"system", "messages"}` or `{"prompt"}`)."""
    if _operation(span) is None:
        return []
    found = _messages(span.attributes.get("ai.prompt.messages"))
    if found:
        return found
    prompt = loads(span.attributes.get("ai.prompt"))
    if not isinstance(prompt, dict):
        return []
    system = [Message(role="system", content=prompt["system"])] if isinstance(prompt.get("system"), str) else []
    if isinstance(prompt.get("messages"), list):
        return system + _messages(prompt["messages"])
    if isinstance(prompt.get("prompt"), str):
        return [*system, Message(role="user", content=prompt["prompt"])]
    return system


def output_messages(span: Span) -> list[Message]:
    """`ai.response.text` and `ai.response.toolCalls` as one assistant message, with its finish reason."""
    if _operation(span) is None:
        return []
    attrs = span.attributes
    raw_calls = loads(attrs.get("ai.response.toolCalls"))
    calls = [
        make_tool_call(c.get("toolCallId"), c.get("toolName"), c["input"] if "input" in c else c.get("args"))
        for c in (raw_calls if isinstance(raw_calls, list) else [])
        if isinstance(c, dict)
    ]
    answer = attrs.get("ai.response.text")
    if answer is None and not calls:
        answer = attrs.get("ai.response.object")  # generateObject: the object as JSON text
    if answer is None and not calls:
        return []
    finish = as_str(attrs.get("ai.response.finishReason"))
    return [Message(role="assistant", content=text(answer), tool_calls=calls, finish_reason=finish)]


def tool_call(span: Span) -> ToolCall | None:
    """The call an `ai.toolCall` span made."""
    if _operation(span) != "ai.toolCall":
        return None
    attrs = span.attributes
    return ToolCall(
        id=as_str(attrs.get("ai.toolCall.id")),
        name=as_str(attrs.get("ai.toolCall.name")) or "?",
        arguments=maybe_json(attrs.get("ai.toolCall.args")),
        result=maybe_json(attrs.get("ai.toolCall.result")),
        span_id=span.span_id,
    )
