"""Synthetic support threads of any length, for judge cost against thread length (`bench/judge.py`).

    from synthetic_threads import synthetic_thread
    line = synthetic_thread(120)   # one `eval` input line (a dict) with 120 turns

Each turn is a user request about an order, most with a tool call and its JSON result (a few
hundred characters, like tau-bench's), then the assistant's answer; the system prompt is a support
policy of about 3,000 characters. The text is built from a seeded generator, so the thread of N
turns is always the same and its first k turns are the thread of k turns.
"""

from __future__ import annotations

import json
import random
from typing import Any

CITIES = ["Lisbon", "Denver", "Osaka", "Lyon", "Austin", "Turin", "Leeds", "Perth", "Quito", "Gdansk"]
ITEMS = ["kettle", "desk lamp", "backpack", "monitor arm", "coffee grinder", "rain jacket", "headset", "blender"]
ASKS = [
    "Where is my order {order}?",
    "Can you change the delivery address of {order} to {city}?",
    "I want to return the {item} from order {order}.",
    "Was I charged twice for order {order}?",
    "Please cancel order {order} if it has not shipped.",
    "When will the {item} in order {order} arrive?",
]
POLICY_RULES = [
    "Verify the customer's identity with their user id before reading or changing any order.",
    "Orders can be cancelled only while their status is pending; shipped orders must be returned instead.",
    "Returns are accepted within 30 days of delivery for unused items in their original packaging.",
    "Refunds go back to the original payment method within five business days of the return scan.",
    "An address change is possible until the order is handed to the carrier.",
    "Never promise a delivery date the tracking data does not support.",
    "Explain every fee before charging it, and ask for explicit confirmation (yes) before any change.",
    "Transfer the customer to a human agent only when the request is outside this policy.",
]


def system_prompt() -> str:
    lines = ["# Support agent policy", "", "You help customers of an online shop with their orders.", ""]
    for k in range(4):
        lines += [f"## Section {k + 1}", *(f"- {rule}" for rule in POLICY_RULES), ""]
    return "\n".join(lines)


def _order(rng: random.Random, order: str) -> dict[str, Any]:
    return {
        "order_id": order,
        "status": rng.choice(["pending", "shipped", "delivered"]),
        "items": [
            {"name": rng.choice(ITEMS), "price": round(rng.uniform(9, 240), 2), "quantity": rng.randint(1, 3)}
            for _ in range(rng.randint(1, 4))
        ],
        "shipping": {
            "city": rng.choice(CITIES),
            "carrier": rng.choice(["UPS", "DHL", "GLS"]),
            "eta": f"2024-06-{rng.randint(1, 28):02d}",
        },
        "payments": [{"method": "card", "amount": round(rng.uniform(20, 500), 2), "captured": rng.random() < 0.9}],
    }


def synthetic_thread(turns: int, seed: int = 7) -> dict[str, Any]:
    """An `eval` input line: a thread of `turns` turns."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()}]
    for t in range(turns):
        order = f"#W{rng.randint(1000000, 9999999)}"
        ask = rng.choice(ASKS).format(order=order, city=rng.choice(CITIES), item=rng.choice(ITEMS))
        messages.append({"role": "user", "content": ask})
        if t % 5 == 4:
            messages.append({"role": "assistant", "content": "Could you confirm your user id first, please?"})
            continue
        call = {
            "id": f"call_{t}",
            "type": "function",
            "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": order})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        details = _order(rng, order)
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": json.dumps(details)})
        item = details["items"][0]
        messages.append(
            {
                "role": "assistant",
                "content": f"Order {order} is {details['status']}: {item['quantity']} x {item['name']} at "
                f"${item['price']}, shipping with {details['shipping']['carrier']} to {details['shipping']['city']}, "
                f"expected on {details['shipping']['eta']}. Is there anything you would like me to change?",
            }
        )
    return {"thread_id": f"synthetic-{turns}-turns", "turns": messages}
