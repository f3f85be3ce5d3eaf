"""The scripted support conversations: what the user says and what the fake model answers.

`replies` lists the model's answers in call order; a turn that uses a tool takes two answers
(the tool call, then the text). Tool results come from the app's local tools at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.fakes.openai_server import Reply, ToolCall


@dataclass(frozen=True)
class Conversation:
    id: str
    kind: str  # "good" or the defect it shows
    user_turns: tuple[str, ...]
    replies: tuple[Reply, ...]
    stream: bool = False


def say(text: str) -> Reply:
    return Reply(text)


def call(name: str, **arguments: str) -> Reply:
    return Reply(tool_calls=[ToolCall(name, arguments)])


REFUND_LINE = "Your refund has been initiated and will appear on your statement within 5-7 business days."
REFUSAL_LINE = "I'm sorry, but I can't help with that request."
REASK_LINE = "I can help with that. Could you please provide your order number?"
FALSE_SUCCESS_LINE = "I've successfully cancelled your order. You'll receive a confirmation email shortly."

CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "support-order-status",
        "good",
        ("Hi, where is my order B20417?", "When will it arrive?", "Perfect, thank you!"),
        (
            call("lookup_order", order_id="B20417"),
            say(
                "Your order B20417 (Ceramic pour-over set) shipped with DHL on November 23 and is on its way. "
                "The tracking number is JD014600004127."
            ),
            call("track_shipment", tracking_number="JD014600004127"),
            say("It is currently at the DHL hub in Leipzig and is expected to arrive on November 28."),
            say("You're welcome! Is there anything else I can help you with?"),
        ),
    ),
    Conversation(
        "support-shipment-tracking",
        "good",
        (
            "Can you check the tracking for 1Z7Y93E50318834112? It's a UPS parcel.",
            "Will I need to sign for it?",
            "OK, thanks.",
        ),
        (
            call("track_shipment", tracking_number="1Z7Y93E50318834112"),
            say("Good news: your UPS parcel is out for delivery in Denver, CO and should arrive today, November 26."),
            say(
                "The tracking details don't mention a signature requirement, so it will most likely be left at "
                "your door. You can add delivery instructions on the UPS website."
            ),
            say("Happy to help! Enjoy your delivery."),
        ),
        stream=True,
    ),
    Conversation(
        "support-cancel-ok",
        "good",
        (
            "I'd like to cancel order C33051, I ordered the wrong size.",
            "Yes, please cancel it.",
            "Thanks! Can I still order the right size?",
        ),
        (
            call("lookup_order", order_id="C33051"),
            say(
                "Order C33051 (Merino wool sweater, size M) is still being processed, so it can be cancelled. "
                "Would you like me to cancel it now?"
            ),
            call("cancel_order", order_id="C33051", reason="wrong size"),
            say(
                "Done: order C33051 has been cancelled. A refund of 89.00 USD will go back to your original "
                "payment method within 5-7 business days."
            ),
            say(
                "Of course. You can place a new order in the right size at any time; the cancelled order "
                "won't affect it."
            ),
        ),
    ),
    Conversation(
        "support-repetition-loop",
        "repetition",
        (
            "I returned order F11876 two weeks ago. Where is my refund?",
            "That's what you told me last week. It has been more than 7 business days already.",
            "Can you check whether the refund was actually sent to my bank?",
            "You keep repeating the same thing. Can I talk to a human?",
        ),
        (
            call("lookup_order", order_id="F11876"),
            say(REFUND_LINE),
            say(REFUND_LINE),
            say(REFUND_LINE),
            say(REFUND_LINE),
        ),
    ),
    Conversation(
        "support-reask-order",
        "reask",
        (
            "Hi, my order A48213 hasn't arrived yet. Can you help?",
            "Yes, please check where it is.",
            "Oh no. Can you update the address to 12 Elm Street, Springfield and resend it?",
            "I already gave it to you: A48213.",
        ),
        (
            call("lookup_order", order_id="A48213"),
            say(
                "I found order A48213: it shipped with UPS on November 22. Would you like me to check where it is now?"
            ),
            call("track_shipment", tracking_number="1Z84A4821300000001"),
            say(
                "The parcel is at the UPS facility in Columbus, OH. A delivery attempt failed because the address "
                "could not be found."
            ),
            say(REASK_LINE),
            say(
                "Thank you. I've passed the new address for order A48213 to our shipping team; they will ask UPS "
                "to reroute the parcel and email you once it is updated."
            ),
        ),
    ),
    Conversation(
        "support-cancel-failed",
        "tool_error_masked",
        ("Please cancel my order E90324.", "Great. When will I get my money back?", "Thanks for the quick help."),
        (
            call("cancel_order", order_id="E90324"),
            say(FALSE_SUCCESS_LINE),
            say("Your refund of 64.50 USD will be issued to your original payment method within 5-7 business days."),
            say("You're welcome! Have a great day."),
        ),
    ),
    Conversation(
        "support-refusal-loop",
        "refusal_loop",
        (
            "I need to update the credit card on my account, the old one expired.",
            "Who can help me then? I just want to change my payment method.",
            "Is there a settings page where I can do it myself?",
        ),
        (say(REFUSAL_LINE), say(REFUSAL_LINE), say(REFUSAL_LINE)),
    ),
)


def scripts() -> dict[str, list[Reply]]:
    """Scripts for `ScriptedHandler`, keyed by each conversation's first user message."""
    return {c.user_turns[0]: list(c.replies) for c in CONVERSATIONS}
