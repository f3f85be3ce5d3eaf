"""Bots in this process for `simulate --target tests.support.sim_bots:NAME` (the callable target)."""

from __future__ import annotations

from typing import Any

Messages = list[dict[str, Any]]


def last_user(messages: Messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def echo(messages: Messages) -> str:
    """Answers every message by quoting it; says which system prompt it was given."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else "none"
    return f"[{system[:20]}] You said: {last_user(messages)}"


async def tools(messages: Messages) -> list[dict[str, Any]]:
    """Looks the order up with a tool, then answers: the tool call and result are part of the reply."""
    call = {"id": f"call_{len(messages)}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "Your order has shipped."},
    ]


def broken(messages: Messages) -> str:
    raise RuntimeError("the bot is down")


def wrong(messages: Messages) -> int:
    return 42
