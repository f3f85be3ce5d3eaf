"""Message shapes shared by several conventions, read into canonical `Message` lists.

- OTel GenAI parts messages: `[{role, parts: [{type: text|tool_call|tool_call_response, ...}]}]`.
- OpenAI chat messages: `{role, content, tool_calls: [{id, function: {name, arguments}}], tool_call_id}`,
  and LangChain's serialised messages (`{lc, kwargs}` and `{type, data}`).
- Bedrock Converse content blocks (`[{"text"}, {"toolUse"}, {"toolResult"}]`), as Strands Agents emits them.
- Free-form payloads (`input.value`, `traceloop.entity.*`, `langfuse.*.input`): message lists,
  chat request/response JSON, or plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import methodcaller
from typing import Any

from tracing_eval.conventions.values import as_str, content_text, dumps, loads, maybe_json, result_text, text
from tracing_eval.model import Message, Role, ToolCall

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
_ROLE_VALUE = methodcaller("get", "role")
_INPUT_KEYS = ("input", "query", "question", "message", "prompt", "user_input", "text", "content")
_OUTPUT_KEYS = ("output", "answer", "response", "result", "completion", "text", "content")


def role_of(value: Any, default: Role | None = None) -> Role | None:
    """Canonical role for a role string (`human`, `model`, `developer`, ... included)."""
    if isinstance(value, str):
        found = _ROLES.get(value)  # as most instrumentations write it
        return found if found is not None else _ROLES.get(value.strip().lower(), default)
    return default


def tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """A ToolCall with JSON-string arguments decoded."""
    return ToolCall(id=as_str(call_id), name=as_str(name) or "?", arguments=maybe_json(arguments))


def _message_list(value: Any) -> list[Any] | None:
    items = loads(value)
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return None
    return [loads(item) if isinstance(item, str) else item for item in items]


# --- OTel GenAI parts --------------------------------------------------------------------------


def parts_messages(value: Any, *, output: bool = False, tail: bool = False) -> list[Message]:
    """OTel GenAI messages (JSON string or structured value) to canonical messages. With `tail`, only
    the system messages and those from the last assistant message on (see `turn_tail`)."""
    items = [item for item in _message_list(value) or [] if isinstance(item, dict)]
    if tail:
        items = turn_tail(items, _ROLE_VALUE, "assistant" if output else None)
    out: list[Message] = []
    for item in items:
        out.extend(parts_message(item, output=output))
    return out


def turn_tail(items: list[Any], raw_role: Callable[[Any], Any], default: Role | None = None) -> list[Any]:
    """The raw history items a turn is assembled from: the system ones, and everything from the last
    assistant item on (an item's role is `role_of(raw_role(item), default)`, as its reader will
    decide it). What comes before that answer belongs to earlier turns; an assistant item always
    reads as (ending with) an assistant message, so the messages read from the tail end exactly as
    those of the whole history do, and the tail is empty only when the whole history is."""
    roles = roles_of(list(map(raw_role, items)), default)
    cut = len(roles) - 1 - roles[::-1].index("assistant") if "assistant" in roles else 0
    return [item for item, r in zip(items[:cut], roles, strict=False) if r == "system"] + items[cut:]


def roles_of(values: list[Any], default: Role | None = None) -> list[Role | None]:
    """`role_of` of each value; the usual spellings are looked up in one pass in C."""
    try:
        found: list[Role | None] = list(map(_ROLES.get, values))
    except TypeError:  # an unhashable value
        return [role_of(value, default) for value in values]
    if None in found:
        found = [
            role if role is not None else role_of(value, default) for role, value in zip(found, values, strict=True)
        ]
    return found


def parts_message(raw: dict[str, Any], *, output: bool = False) -> list[Message]:
    """One parts message; tool responses become one `tool` message each."""
    role = role_of(raw.get("role"), "assistant" if output else None)
    if role is None:
        return []
    parts = raw.get("parts")
    if not isinstance(parts, list):
        parts = [] if raw.get("content") is None else [{"type": "text", "content": raw.get("content")}]
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in (None, "text"):
            texts.append(text(part.get("content", part.get("text"))))
        elif kind == "tool_call":
            calls.append(tool_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif kind == "tool_call_response":
            response = part["response"] if "response" in part else part.get("result")
            results.append(Message(role="tool", content=result_text(response), tool_call_id=as_str(part.get("id"))))
    content = "\n".join(t for t in texts if t)
    finish = as_str(raw.get("finish_reason"))
    if role == "tool":
        if results:
            return results
        return [Message(role="tool", content=content, tool_call_id=as_str(raw.get("tool_call_id") or raw.get("id")))]
    if role == "assistant":
        return [*results, Message(role="assistant", content=content, tool_calls=calls, finish_reason=finish)]
    if results and not content:
        return results  # tool results sent in a user message (Anthropic style)
    return [*results, Message(role=role, content=content)]


# --- Bedrock Converse content blocks (Strands Agents) ------------------------------------------

_CONVERSE_KEYS = frozenset(
    {"text", "toolUse", "toolResult", "reasoningContent", "image", "document", "video", "cachePoint", "guardContent"}
)


def converse_messages(role: Role, value: Any) -> list[Message] | None:
    """`[{"text"}, {"toolUse": {toolUseId, name, input}}, {"toolResult": {toolUseId, status, content}}]`
    (JSON or structured) as canonical messages; None when `value` is not such a list."""
    blocks = loads(value) if isinstance(value, str) else value
    if not (isinstance(blocks, list) and blocks):
        return None
    if not all(isinstance(b, dict) and "type" not in b and _CONVERSE_KEYS.intersection(b) for b in blocks):
        return None
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for block in blocks:
        use, result = block.get("toolUse"), block.get("toolResult")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(use, dict):
            calls.append(tool_call(use.get("toolUseId"), use.get("name"), use.get("input")))
        elif isinstance(result, dict):
            call_id = as_str(result.get("toolUseId"))
            results.append(Message(role="tool", content=result_text(result.get("content")), tool_call_id=call_id))
    content = "\n".join(texts)
    if role == "assistant":
        return [Message(role="assistant", content=content, tool_calls=calls)]
    if results and not content:
        return results  # tool results travel in a user (or tool) message
    return [*results, Message(role=role, content=content)]


# --- OpenAI chat -------------------------------------------------------------------------------


def openai_tool_calls(raw: Any) -> list[ToolCall]:
    """`[{id, type: function, function: {name, arguments}}]` (or flat `{id, name, arguments}`)."""
    raw = loads(raw)
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    calls = []
    for tc in raw:
        if not isinstance(tc, dict):
            continue
        fn = found if isinstance(found := tc.get("function"), dict) else {}
        args = fn.get("arguments", tc.get("arguments", tc.get("args")))
        calls.append(tool_call(tc.get("id") or tc.get("call_id"), fn.get("name") or tc.get("name"), args))
    return calls


def openai_message(raw: dict[str, Any], *, output: bool = False, finish_reason: Any = None) -> list[Message]:
    """One OpenAI-style chat message (LangChain `type` also accepted as the role)."""
    role = role_of(raw.get("role") or raw.get("type"), "assistant" if output else None)
    if role is None:
        return []
    content = content_text(raw.get("content"))
    if role == "tool":
        call_id = as_str(raw.get("tool_call_id") or raw.get("id"))
        return [Message(role="tool", content=content, tool_call_id=call_id)]
    if role != "assistant":
        return [Message(role=role, content=content)]
    calls = openai_tool_calls(raw.get("tool_calls"))
    if isinstance(raw.get("function_call"), dict):
        calls.append(tool_call(None, raw["function_call"].get("name"), raw["function_call"].get("arguments")))
    metadata = found if isinstance(found := raw.get("response_metadata"), dict) else {}
    finish = as_str(finish_reason) or as_str(raw.get("finish_reason")) or as_str(metadata.get("finish_reason"))
    return [Message(role="assistant", content=content, tool_calls=calls, finish_reason=finish)]


def _langchain(raw: dict[str, Any]) -> dict[str, Any]:
    """A serialised LangChain message as a plain dict: the constructor form
    (`{lc, id: [..., "HumanMessage"], kwargs}`) or the `messages_to_dict` form (`{type, data}`)."""
    data = raw.get("data")
    if isinstance(data, dict) and role_of(raw.get("type")) is not None and "role" not in raw:
        return {**data, "type": data.get("type") or raw["type"]}
    kwargs = raw.get("kwargs")
    if "lc" not in raw or not isinstance(kwargs, dict):
        return raw
    ids = raw.get("id")
    cls = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else ""
    return {**kwargs, "type": kwargs.get("type") or cls.lower().removesuffix("chunk").removesuffix("message")}


def _looks_like_message(raw: Any) -> bool:
    if not isinstance(raw, dict):
        return False
    raw = _langchain(raw)
    return "role" in raw or isinstance(raw.get("parts"), list) or role_of(raw.get("type")) is not None


def _any_message(raw: dict[str, Any], *, output: bool) -> list[Message]:
    raw = _langchain(raw)
    if isinstance(raw.get("parts"), list):
        return parts_message(raw, output=output)
    return openai_message(raw, output=output)


def message_list(value: Any, *, output: bool = False) -> list[Message]:
    """A list of chat messages in either shape (parts or OpenAI), item by item."""
    out: list[Message] = []
    for item in _message_list(value) or []:
        if isinstance(item, dict):
            out.extend(_any_message(item, output=output))
    return out


# --- Free-form payloads -------------------------------------------------------------------------


def payload_messages(value: Any, *, output: bool) -> list[Message]:
    """Messages from a free-form input or output payload; plain text becomes one user/assistant message."""
    data = maybe_json(value)
    role: Role = "assistant" if output else "user"
    if data is None:
        return []
    if isinstance(data, str):
        return [Message(role=role, content=data)] if data.strip() else []
    if isinstance(data, list):
        if data and all(_looks_like_message(x) for x in data):
            return message_list(data, output=output)
        return _text_message(role, text(data))
    if isinstance(data, dict):
        return _dict_messages(data, role=role, output=output)
    return _text_message(role, dumps(data))


def _dict_messages(data: dict[str, Any], *, role: Role, output: bool) -> list[Message]:
    if isinstance(data.get("choices"), list):  # chat completion response
        out: list[Message] = []
        for choice in data["choices"]:
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                out.extend(openai_message(choice["message"], output=True, finish_reason=choice.get("finish_reason")))
        return out
    if isinstance(data.get("messages"), list):  # chat request, or an agent state
        out = message_list(data["messages"], output=output)
        if out:
            return out
    if _looks_like_message(data):
        return _any_message(data, output=output)
    if isinstance(data.get("output"), list):  # OpenAI Responses API response
        return _response_items(data["output"])
    if isinstance(data.get("input"), list):  # OpenAI Responses API request
        instructions = data.get("instructions")
        system = [Message(role="system", content=instructions)] if isinstance(instructions, str) else []
        return system + _response_items(data["input"], output=False)
    if isinstance(data.get("kwargs"), dict) or isinstance(data.get("args"), list):  # decorated function call
        args = data["args"] if isinstance(data.get("args"), list) else []
        if args and isinstance(args[0], str):
            return _text_message(role, args[0])
        data = data["kwargs"] if isinstance(data.get("kwargs"), dict) else {}
    for key in _OUTPUT_KEYS if output else _INPUT_KEYS:
        if isinstance(data.get(key), (str, list, dict)) and data[key]:
            return payload_messages(data[key], output=output)
    return _text_message(role, dumps(data)) if data else []


def _response_items(items: list[Any], *, output: bool = True) -> list[Message]:
    out: list[Message] = []
    for item in items:
        if isinstance(item, str):
            out.extend(_text_message("assistant" if output else "user", item))
        elif not isinstance(item, dict):
            continue
        elif item.get("type") == "function_call":
            call = tool_call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments"))
            out.append(Message(role="assistant", tool_calls=[call]))
        elif item.get("type") == "function_call_output":
            call_id = as_str(item.get("call_id"))
            out.append(Message(role="tool", content=result_text(item.get("output")), tool_call_id=call_id))
        elif "role" in item:
            out.extend(openai_message(item, output=output))
    return out


def _text_message(role: Role, content: str) -> list[Message]:
    return [Message(role=role, content=content)] if content.strip() else []
