"""D8 `thread_stats`: raw numbers, no score."""

import pytest

from tracing_eval.metrics.deterministic.thread_stats import ThreadStats, percentile
from tracing_eval.model import Message, Status, Thread, ToolCall, Turn
from tracing_eval.transcripts import thread_from_messages


def stats(thread: Thread) -> dict:
    [result] = ThreadStats().evaluate(thread)
    assert (result.score, result.passed, result.status, result.threshold) == (None, None, Status.OK, None)
    return result.evidence


def timed_turn(index: int, start_ms: int, duration_ms: int, tokens: tuple[int, int] | None = None) -> Turn:
    return Turn(
        index=index,
        messages=[
            Message(role="user", content="hi there"),
            Message(role="assistant", content="Hello, how can I help?"),
        ],
        started_ns=start_ms * 1_000_000,
        ended_ns=(start_ms + duration_ms) * 1_000_000,
        input_tokens=tokens[0] if tokens else None,
        output_tokens=tokens[1] if tokens else None,
    )


def test_counts_and_ratio() -> None:
    thread = thread_from_messages(
        "t",
        [
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "abcd"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "Error: boom"},
            {"role": "assistant", "content": "abcdefgh"},
            {"role": "user", "content": "Thanks, bye!"},
        ],
    )
    ev = stats(thread)
    assert (ev["turns"], ev["user_messages"], ev["assistant_messages"], ev["assistant_replies"]) == (2, 2, 2, 1)
    assert (ev["tool_calls"], ev["tool_errors"], ev["tool_calls_per_turn"]) == (1, 1, 0.5)
    assert ev["assistant_user_length_ratio"] == pytest.approx(8 / 16)
    assert (ev["ends_with_user"], ev["abandoned"]) == (True, False)
    assert ev["latency_ms_p95"] is None and ev["input_tokens"] is None


def test_latency_and_tokens() -> None:
    thread = Thread(
        key="t", turns=[timed_turn(0, 10, 100, (10, 5)), timed_turn(1, 1000, 300, (20, 7)), timed_turn(2, 2000, 200)]
    )
    ev = stats(thread)
    assert (ev["latency_ms_p50"], ev["latency_turns"]) == (200.0, 3)
    assert ev["latency_ms_p95"] == pytest.approx(290.0)
    assert (ev["input_tokens"], ev["output_tokens"]) == (30, 12)


def test_unknown_times_are_left_out() -> None:
    thread = Thread(key="t", turns=[timed_turn(0, 0, 100), timed_turn(1, 1000, 300)])
    assert (stats(thread)["latency_ms_p50"], stats(thread)["latency_turns"]) == (300.0, 1)


def test_abandonment() -> None:
    left = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "where is my refund"},
        ],
    )
    assert stats(left)["abandoned"] is True
    angry = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "refund?"},
            {"role": "assistant", "content": "No."},
            {"role": "user", "content": "This is useless."},
            {"role": "assistant", "content": "Sorry."},
        ],
    )
    assert stats(angry)["abandoned"] is True
    closed = thread_from_messages("t", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}])
    assert stats(closed)["abandoned"] is False


def test_percentile() -> None:
    assert percentile([], 95) is None
    assert percentile([5.0], 50) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_empty_thread() -> None:
    ev = stats(Thread(key="empty"))
    assert (ev["turns"], ev["tool_calls_per_turn"], ev["assistant_user_length_ratio"], ev["abandoned"]) == (
        0,
        0.0,
        None,
        False,
    )


def test_tool_calls_in_a_hand_built_thread() -> None:
    thread = Thread(
        key="t",
        turns=[
            Turn(
                index=0,
                messages=[
                    Message(role="user", content="go"),
                    Message(role="assistant", tool_calls=[ToolCall(name="f", error="x")]),
                ],
            )
        ],
    )
    assert stats(thread)["tool_errors"] == 1


def _ending(
    last_user: str, reply_before: str = "Your seat is changed to 12A. Anything else?", *, answered: bool = True
) -> dict:
    """The stats of a thread that ends on `last_user` (after `reply_before`), answered or not."""
    messages = [
        {"role": "user", "content": "Please move me to seat 12A."},
        {"role": "assistant", "content": reply_before},
        {"role": "user", "content": last_user},
    ]
    if answered:
        messages.append({"role": "assistant", "content": "You're welcome, have a good flight."})
    return stats(thread_from_messages("t", messages))


@pytest.mark.parametrize("last", ["Thank you!!!", "thanks so much!!!", "THANK YOU SO MUCH!!!", "Perfect, bye!"])
def test_thanks_with_exclamation_marks_is_a_closing_not_abandonment(last: str) -> None:
    assert _ending(last)["abandoned"] is False


def test_an_unprompted_ask_for_a_human_at_the_end_is_abandonment() -> None:
    assert _ending("Let me talk to a real person.")["abandoned"] is True


@pytest.mark.parametrize(
    "last",
    [
        "Why are you repeating yourself?",
        "You didn't answer my question.",
        "That doesn't answer my question.",
        "This isn't helpful at all.",
        "You're not being very helpful.",
        "Forget it, I'll do it myself.",
        "Are you still there?",
        "You're lying to me.",
        "wtf",
    ],
)
def test_leaving_annoyed_at_the_assistant_is_abandonment(last: str) -> None:
    assert _ending(last)["abandoned"] is True


def test_accepting_an_offered_transfer_is_a_hand_off_not_abandonment() -> None:
    thread = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "I need a refund for my cancelled trip."},
            {"role": "assistant", "content": "I can't refund that. Shall I transfer you to a human agent?"},
            {"role": "user", "content": "Yes, please transfer me to a human agent."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "h", "function": {"name": "transfer_to_human_agents", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "h", "content": "Transfer successful"},
            {"role": "assistant", "content": "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."},
        ],
    )
    ev = stats(thread)
    assert (ev["handed_off"], ev["abandoned"]) == (True, False)


@pytest.mark.parametrize(
    "last",
    [
        "No, that is all.",
        "Nope, that should do it!",
        "No, I don't need anything else",
        "I'm all set.",
        "I think that is all I need to know about the restaurant.",
        "have yourself a great day",
        "You, too.",
        "I appreciate that.",
        "See you later.",
        "cool",
        "\U0001f44d",
        "gracias",
        "Merci beaucoup !",
    ],
)
def test_closings_in_other_words_end_a_thread_without_abandoning_it(last: str) -> None:
    ev = _ending(last)
    assert (ev["abandoned"], _ending(last, answered=False)["abandoned"]) == (False, False)


@pytest.mark.parametrize(
    ("last", "reply_before", "abandoned"),
    [
        ("No", "Your seat is changed to 12A. Anything else?", False),  # nothing more to ask
        ("No", "Did the new seat show up in the app?", True),  # the question is left open
        ("Thanks! One more question: is there wifi on board?", "Done. Anything else?", True),
        ("Ok, can we try 2 nights instead please?", "I'm sorry, I was unable to book the hotel.", True),
    ],
)
def test_a_last_message_left_unanswered_is_abandonment_unless_it_closes(
    last: str, reply_before: str, abandoned: bool
) -> None:
    assert _ending(last, reply_before, answered=False)["abandoned"] is abandoned


@pytest.mark.parametrize(
    ("last", "reply_before", "abandoned"),
    [
        ("No, forget about it. Thanks.", "I'm sorry, I was unable to book that ticket. Anything else?", True),
        ("Never mind.", "Sorry, I couldn't find any flights on that date.", True),
        ("Whatever.", "Unfortunately there are no tables left at 7 pm.", True),
        ("No, forget it.", "Should I add the visit to your calendar?", False),  # declines an offer
        ("Never mind, what about Friday?", "Sorry, I couldn't find any flights on that date.", False),
        ("Whatever is cheapest.", "Sorry, nothing at 7 pm. Which airline?", False),
    ],
)
def test_giving_up_after_a_failed_reply_is_abandonment_even_when_answered(
    last: str, reply_before: str, abandoned: bool
) -> None:
    assert _ending(last, reply_before)["abandoned"] is abandoned
