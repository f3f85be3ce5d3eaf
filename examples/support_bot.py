"""The example app: a customer-support bot with three local tools, talking to an OpenAI-compatible API.

`run_conversation` plays the user's turns against the model, executes the tool calls the model
asks for, and reports each turn and tool execution to a `Telemetry` (spans in the instrumented
variants, nothing in the plain run). The returned message list is the OpenAI-style transcript.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

import openai

MODEL = "gpt-4o-mini"
AGENT_NAME = "support-bot"
SYSTEM_PROMPT = (
    "You are Northwind Outfitters' support assistant. Help with order status, tracking and "
    "cancellations. Use the tools; never guess. Be brief."
)

ORDERS: dict[str, dict[str, Any]] = {
    "A48213": {
        "status": "shipped",
        "items": ["Trail running shoes"],
        "carrier": "UPS",
        "tracking_number": "1Z84A4821300000001",
        "shipped_on": "2026-11-22",
        "total": "129.00 USD",
    },
    "B20417": {
        "status": "in_transit",
        "items": ["Ceramic pour-over set"],
        "carrier": "DHL",
        "tracking_number": "JD014600004127",
        "shipped_on": "2026-11-23",
        "total": "42.00 USD",
    },
    "C33051": {"status": "processing", "items": ["Merino wool sweater, size M"], "total": "89.00 USD"},
    "E90324": {
        "status": "shipped",
        "items": ["Insulated water bottle"],
        "carrier": "USPS",
        "tracking_number": "9400100000000000090324",
        "shipped_on": "2026-11-25",
        "total": "64.50 USD",
    },
    "F11876": {
        "status": "returned",
        "items": ["Rain jacket"],
        "return_received": "2026-11-12",
        "refund_status": "pending",
        "total": "110.00 USD",
    },
}
SHIPMENTS: dict[str, dict[str, Any]] = {
    "JD014600004127": {"status": "in_transit", "location": "Leipzig hub", "estimated_delivery": "2026-11-28"},
    "1Z7Y93E50318834112": {"status": "out_for_delivery", "location": "Denver, CO", "estimated_delivery": "2026-11-26"},
    "1Z84A4821300000001": {
        "status": "exception",
        "location": "Columbus, OH",
        "detail": "Delivery attempt failed: address not found",
    },
}


class ToolError(Exception):
    """A tool could not do what was asked; its message is what the model gets back."""


def lookup_order(order_id: str) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise ToolError(f"Order {order_id} not found")
    return {"order_id": order_id, **ORDERS[order_id]}


def cancel_order(order_id: str, reason: str | None = None) -> dict[str, Any]:
    order = lookup_order(order_id)
    if order["status"] != "processing":
        raise ToolError(f"Order {order_id} has already {order['status']} and can no longer be cancelled")
    return {"order_id": order_id, "status": "cancelled", "refund_amount": order["total"]}


def track_shipment(tracking_number: str) -> dict[str, Any]:
    if tracking_number not in SHIPMENTS:
        raise ToolError(f"Tracking number {tracking_number} not found")
    return {"tracking_number": tracking_number, **SHIPMENTS[tracking_number]}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "lookup_order": lookup_order,
    "cancel_order": cancel_order,
    "track_shipment": track_shipment,
}


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    params = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


_ORDER_ID = {"type": "string"}
TOOL_DEFINITIONS: list[dict[str, Any]] = [
    _function("lookup_order", "Get an order's status and shipping details.", {"order_id": _ORDER_ID}, ["order_id"]),
    _function(
        "cancel_order",
        "Cancel an order that has not shipped yet.",
        {"order_id": _ORDER_ID, "reason": {"type": "string"}},
        ["order_id"],
    ),
    _function(
        "track_shipment",
        "Locate a parcel and estimate delivery.",
        {"tracking_number": {"type": "string"}},
        ["tracking_number"],
    ),
]
TOOL_SCHEMAS = {d["function"]["name"]: d["function"] for d in TOOL_DEFINITIONS}


class TurnRecord(Protocol):
    def answer(self, text: str) -> None: ...


class ToolRecord(Protocol):
    def result(self, value: Any) -> None: ...


class Telemetry(Protocol):
    """What the app reports: one span per user turn, one per tool execution (errors propagate)."""

    def turn(self, conversation_id: str, user_text: str) -> AbstractContextManager[TurnRecord]: ...

    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> AbstractContextManager[ToolRecord]: ...


class _Ignore:
    def answer(self, text: str) -> None:
        pass

    def result(self, value: Any) -> None:
        pass


class NoTelemetry:
    """The uninstrumented app."""

    @contextmanager
    def turn(self, conversation_id: str, user_text: str) -> Iterator[TurnRecord]:
        yield _Ignore()

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[ToolRecord]:
        yield _Ignore()


def execute_tool(telemetry: Telemetry, call: dict[str, Any]) -> str:
    """Run one tool call; a `ToolError` becomes `{"error": ...}` for the model."""
    name, raw_args = call["function"]["name"], call["function"]["arguments"]
    arguments = json.loads(raw_args or "{}")
    try:
        with telemetry.tool(name, call["id"], arguments) as record:
            value = TOOLS[name](**arguments)
            record.result(value)
    except ToolError as exc:
        return json.dumps({"error": str(exc)})
    return json.dumps(value)


def _complete(client: openai.OpenAI, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    """One chat completion as an assistant message dict (streamed chunks are accumulated)."""
    kwargs: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": TOOL_DEFINITIONS, "temperature": 0}
    if not stream:
        msg = client.chat.completions.create(**kwargs).choices[0].message
        out: dict[str, Any] = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                }
                for tc in msg.tool_calls
            ]
        return out
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}):
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    d.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = d.id or call["id"]
                if d.function:
                    call["function"]["name"] += d.function.name or ""
                    call["function"]["arguments"] += d.function.arguments or ""
    out = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        out["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


def run_conversation(
    client: openai.OpenAI,
    conversation_id: str,
    user_turns: list[str],
    telemetry: Telemetry,
    *,
    stream: bool = False,
    max_steps: int = 4,
) -> list[dict[str, Any]]:
    """Play every user turn; returns the full transcript, system prompt first."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    for user_text in user_turns:
        with telemetry.turn(conversation_id, user_text) as turn:
            messages.append({"role": "user", "content": user_text})
            for _ in range(max_steps):
                reply = _complete(client, messages, stream)
                messages.append(reply)
                if not reply.get("tool_calls"):
                    break
                for call in reply["tool_calls"]:
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": execute_tool(telemetry, call)}
                    )
            turn.answer(messages[-1].get("content") or "")
    return messages
