"""The three scripted conversations every framework in the corpus plays, and what a reader must get.

Ten user turns in all: a tool conversation (one and two tool calls per turn), one where the
assistant gives the same answer three times, and a plain one. The fake model's replies are
scripted per conversation (`scripts`); the apps run the tool `lookup_order` themselves, from
`ORDERS`, so its results are real tool output. `EXPECTED` is the transcript a correct reader
rebuilds from any framework's spans: per turn, the user's text, the tool calls in order (name,
arguments, result) and the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.fakes.openai_server import Reply, ToolCall

MODEL = "gpt-4o-mini"
SYSTEM_PROMPT = "You are the support assistant of a small online shop. Use lookup_order to check an order. Be brief."
TOOL_NAME = "lookup_order"
TOOL_DESCRIPTION = "Look up the status of an order by its id."
ORDERS = {
    "A1001": "Order A1001: shipped on May 2, arriving on May 6.",
    "B2002": "Order B2002: being packed, ships tomorrow.",
}
REFUND_LINE = "Your refund has been initiated and will appear on your statement within 5-7 business days."


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class Turn:
    user: str
    answer: str
    calls: tuple[Call, ...] = ()  # one model reply per call, in this order


@dataclass(frozen=True)
class Conversation:
    id: str
    turns: tuple[Turn, ...]
    kind: str = "good"


def lookup(order_id: str) -> Call:
    return Call(TOOL_NAME, {"order_id": order_id}, ORDERS[order_id])


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "tool-orders",
        (
            Turn(
                "Where is my order A1001?",
                "Order A1001 shipped on May 2 and should arrive on May 6.",
                (lookup("A1001"),),
            ),
            Turn(
                "And what about order B2002?",
                "Order B2002 is being packed and ships tomorrow.",
                (lookup("B2002"),),
            ),
            Turn(
                "Please check A1001 once more, then B2002.",
                "A1001 is still on its way, and B2002 ships tomorrow.",
                (lookup("A1001"), lookup("B2002")),
            ),
            Turn("Thanks, that's all.", "You're welcome! Have a nice day."),
        ),
    ),
    Conversation(
        "repeat-refund",
        (
            Turn("I returned my blender two weeks ago. Where is my refund?", REFUND_LINE),
            Turn("You told me that last week. It has been more than ten days.", REFUND_LINE),
            Turn("Can you check whether the refund was actually sent to my bank?", REFUND_LINE),
        ),
        kind="repetition",
    ),
    Conversation(
        "plain-hours",
        (
            Turn(
                "Hi! What are your opening hours?",
                "We are open Monday to Friday from 9am to 6pm, and on Saturday from 10am to 2pm.",
            ),
            Turn("Are you open on public holidays?", "No, the shop is closed on public holidays."),
            Turn("Great, thank you!", "You're welcome! See you soon."),
        ),
    ),
)


def scripts() -> dict[str, list[Reply]]:
    """The fake model's replies per conversation (keyed by its first user message), in call order."""
    out: dict[str, list[Reply]] = {}
    for conv in CONVERSATIONS:
        replies: list[Reply] = []
        for turn in conv.turns:
            replies += [Reply(tool_calls=[ToolCall(c.name, c.arguments)]) for c in turn.calls]
            replies.append(Reply(turn.answer))
        out[conv.turns[0].user] = replies
    return out


def plan(prefix: str) -> dict[str, Any]:
    """What an app needs to play the conversations: user turns, system prompt, the tool and its data."""
    return {
        "prefix": prefix,
        "model": MODEL,
        "system": SYSTEM_PROMPT,
        "tool": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "results": ORDERS},
        "conversations": [{"id": c.id, "user_turns": [t.user for t in c.turns]} for c in CONVERSATIONS],
    }
