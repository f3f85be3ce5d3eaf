"""The thread as the judge reads it: rendered once, the same prefix for every metric of a thread."""

from __future__ import annotations

import json
from typing import Any

from tracing_eval.model import Message, Thread, ToolCall

MAX_TOOL_TEXT = 1500  # characters of a tool argument or result shown to the judge
MAX_MESSAGE_TEXT = 6000


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" …[{len(text) - limit} more characters]"


def _value(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _clip(text, MAX_TOOL_TEXT)


def render_tool_call(call: ToolCall) -> str:
    """`name(args) -> result` or `name(args) -> ERROR: ...`."""
    outcome = (
        f"ERROR: {_clip(call.error, MAX_TOOL_TEXT)}" if call.error else _value(call.result) or "(no result recorded)"
    )
    return f"{call.name}({_value(call.arguments)}) -> {outcome}"


def _message_line(m: Message, turn: int) -> str:
    head = f"[{m.position}] {m.role} (turn {turn})"
    if m.role == "tool":
        return f"{head}: {_clip(m.content, MAX_TOOL_TEXT)}"
    lines = [f"{head}: {_clip(m.content, MAX_MESSAGE_TEXT)}" if m.content else f"{head}:"]
    lines += [f"    tool call: {render_tool_call(tc)}" for tc in m.tool_calls]
    return "\n".join(lines)


def render_transcript(thread: Thread) -> str:
    """Numbered transcript: `[position] role (turn N): text`, tool calls with their outcome."""
    parts = []
    if thread.system_prompt:
        parts.append(f"SYSTEM PROMPT OF THE ASSISTANT:\n{_clip(thread.system_prompt, MAX_MESSAGE_TEXT)}\n")
    parts.append(f"CONVERSATION ({len(thread.turns)} turns; [n] is the message number):")
    for turn in thread.turns:
        parts += [_message_line(m, turn.index) for m in turn.messages]
    return "\n".join(parts)
