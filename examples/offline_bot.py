"""A support bot without a model, for trying `simulate` offline: `--target examples.offline_bot:reply`.

It finds the order number the user named last and answers from the example app's order table
(`support_bot.lookup_order`), with the tool call and its result in the reply, as a real agent would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from examples.support_bot import ToolError, lookup_order

_ORDER = re.compile(r"\b[A-Z]\d{5}\b")


def reply(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The answer to the conversation so far (OpenAI-style messages, system prompt first)."""
    said = [str(m["content"]).upper() for m in reversed(messages) if m["role"] == "user"]
    found = next((hit for text in said if (hit := _ORDER.search(text))), None)  # the latest order named
    if found is None:
        return "Could you give me your order number (a letter and five digits)?"
    call = {
        "id": f"call_{len(messages)}",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": found[0]})},
    }
    try:
        order = lookup_order(found[0])
        result, answer = json.dumps(order), f"Order {found[0]} is {order['status'].replace('_', ' ')}."
    except ToolError as exc:
        result, answer = json.dumps({"error": str(exc)}), f"I could not find order {found[0]}."
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": result},
        {"role": "assistant", "content": answer},
    ]
