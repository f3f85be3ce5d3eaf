"""OpenAI-style message lists (the `eval FILE` input) to canonical threads.

A turn starts at each run of user messages and holds everything until the next user message.
Every message keeps its 0-based position in the input array, so evidence can point back at it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import orjson

from tracing_eval.model import Message, Thread, ToolCall, Turn
from tracing_eval.tool_results import looks_like_tool_error

ROLES = {"system", "user", "assistant", "tool"}


class TranscriptError(ValueError):
    """A transcript line that does not follow the schema."""


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _tool_calls(raw: Any) -> list[ToolCall]:
    calls = []
    for tc in raw or []:
        fn = tc.get("function") or {}
        args = fn.get("arguments", tc.get("arguments"))
        if isinstance(args, str):
            try:
                args = orjson.loads(args)
            except orjson.JSONDecodeError:
                pass
        calls.append(ToolCall(id=tc.get("id"), name=fn.get("name") or tc.get("name") or "?", arguments=args))
    return calls


_INLINE_TOOL_CALLS = "[tool_calls] "


def _split_inline_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Some exports (tau-bench) flatten tool calls into the text as `[tool_calls] [...]`."""
    head, sep, tail = text.partition(_INLINE_TOOL_CALLS)
    if not sep:
        return text, []
    try:
        calls = orjson.loads(tail)
    except orjson.JSONDecodeError:
        return text, []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        return text, []
    return head.strip(), calls


def message_from_openai(raw: dict[str, Any], position: int) -> Message:
    role = raw.get("role")
    if role not in ROLES:
        raise TranscriptError(f"message {position}: role must be one of {sorted(ROLES)}, got {role!r}")
    content = _text(raw.get("content"))
    raw_calls = raw.get("tool_calls") or []
    if role == "assistant" and not raw_calls:
        content, raw_calls = _split_inline_tool_calls(content)
    return Message(
        role=role,
        content=content,
        tool_calls=_tool_calls(raw_calls) if role == "assistant" else [],
        tool_call_id=raw.get("tool_call_id"),
        finish_reason=raw.get("finish_reason"),
        position=position,
    )


def tool_result_messages(messages: Iterable[Message]) -> dict[int, Message]:
    """The tool message that answers each tool call, by `id(call)`.

    A result answers the earliest open call with its `tool_call_id` (ids can repeat in long
    transcripts), or the earliest open call when it names none. Open calls are queued in order and
    by id, and answered ones dropped from the fronts as they are met, so calls that are never
    answered cost nothing per later result.
    """
    answered: dict[int, Message] = {}
    in_order: deque[ToolCall] = deque()
    by_id: dict[str, deque[ToolCall]] = {}
    still_open = with_id = 0  # open calls, and those of them with an id

    def first_open(queue: deque[ToolCall] | None) -> ToolCall | None:
        while queue and id(queue[0]) in answered:
            queue.popleft()
        return queue[0] if queue else None

    for m in messages:
        if m.role == "assistant":
            for c in m.tool_calls:
                in_order.append(c)
                if c.id:
                    by_id.setdefault(c.id, deque()).append(c)
                    with_id += 1
            still_open += len(m.tool_calls)
        elif m.role == "tool" and still_open:
            call = first_open(by_id.get(m.tool_call_id)) if m.tool_call_id else None
            if call is None and not (m.tool_call_id and with_id):
                call = first_open(in_order)
            if call is not None:
                answered[id(call)] = m
                still_open -= 1
                with_id -= bool(call.id)
    return answered


def link_tool_results(messages: list[Message]) -> None:
    """Copy each tool message's content onto the tool call it answers, marking errors."""
    answered = tool_result_messages(messages)
    for m in messages:
        for call in m.tool_calls:
            result = answered.get(id(call))
            if result is None:
                continue
            call.result = result.content
            if call.error is None and looks_like_tool_error(result.content):
                call.error = result.content[:500]


def thread_from_messages(
    key: str, raw_messages: list[dict[str, Any]], *, source: str = "file", metadata: dict[str, Any] | None = None
) -> Thread:
    messages = [message_from_openai(m, i) for i, m in enumerate(raw_messages)]
    link_tool_results(messages)
    system = [m.content for m in messages if m.role == "system"]
    turns: list[Turn] = []
    current: list[Message] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user" and current and any(x.role != "user" for x in current):
            turns.append(Turn(index=len(turns), messages=current))
            current = []
        current.append(m)
    if current:
        turns.append(Turn(index=len(turns), messages=current))
    return Thread(
        key=key,
        source=source,
        conversation_id=key,
        system_prompt="\n\n".join(system) or None,
        turns=turns,
        metadata=metadata or {},
    )


def thread_from_json_line(line: str | bytes, line_no: int) -> Thread:
    """Parse one JSON line of the `eval` input schema; errors name the line."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise TranscriptError(f"line {line_no}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise TranscriptError(f"line {line_no}: expected a JSON object")
    turns = obj.get("turns")
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise TranscriptError(f"line {line_no}: 'turns' must be a list of message objects")
    key = str(obj.get("thread_id") or f"line-{line_no}")
    try:
        return thread_from_messages(
            key, turns, metadata={k: v for k, v in obj.items() if k in ("task_description", "success_criteria")}
        )
    except TranscriptError as exc:
        raise TranscriptError(f"line {line_no}: {exc}") from None


def _arguments_json(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def thread_to_messages(thread: Thread) -> list[dict[str, Any]]:
    """The thread as OpenAI-style messages (the `eval` input), system prompt first. A tool call with a
    recorded result and no tool message of its own gets one right after the call."""
    out: list[dict[str, Any]] = [{"role": "system", "content": thread.system_prompt}] if thread.system_prompt else []
    answered = {m.tool_call_id for m in thread.messages if m.role == "tool"}
    anonymous_results = None in answered
    for m in thread.messages:
        message: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_call_id:
            message["tool_call_id"] = m.tool_call_id
        calls = [(tc.id or f"call_{m.position}_{i}", tc) for i, tc in enumerate(m.tool_calls)]
        if calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": _arguments_json(tc.arguments)},
                }
                for cid, tc in calls
            ]
        out.append(message)
        if anonymous_results:
            continue
        for cid, tc in calls:
            if tc.id not in answered and (tc.result is not None or tc.error is not None):
                result = tc.result if tc.result is not None else tc.error
                content = result if isinstance(result, str) else orjson.dumps(result).decode()
                out.append({"role": "tool", "tool_call_id": cid, "content": content})
    return out
