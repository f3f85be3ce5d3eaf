"""D4 `tool_errors`: failing calls, recovery, repeated failures, loops and masked errors."""

import json
import random
import re
from typing import Any

import pytest

from tracing_eval.metrics.deterministic import tool_errors
from tracing_eval.metrics.deterministic.tool_errors import Mentions, ToolErrors, canonical_args, named
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.text import SPACELESS
from tracing_eval.transcripts import thread_from_messages


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*specs: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message with tool calls (id, name, arguments)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in specs
        ],
    }


def result(cid: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def evaluate(*messages: dict[str, Any]) -> tuple[dict[int, MetricResult], MetricResult]:
    results = ToolErrors().evaluate(thread_from_messages("t", list(messages)))
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


LOOKUP = ("c1", "get_order", {"order_id": "8841-22"})


def test_no_tool_calls_is_not_applicable() -> None:
    results = ToolErrors().evaluate(thread_from_messages("t", [user("hi"), say("hello")]))
    assert [r.status for r in results] == [Status.NOT_APPLICABLE]
    assert results[0].scope == Scope.THREAD


def test_successful_calls_are_none() -> None:
    turns, thread = evaluate(
        user("where is my order 8841-22?"), calls(LOOKUP), result("c1", '{"status": "shipped"}'), say("It has shipped.")
    )
    assert (thread.label, thread.score, thread.passed) == ("none", 1.0, True)
    assert turns[0].label == "none"
    assert thread.evidence["failed_calls"] == []


@pytest.mark.parametrize(
    "content",
    [
        '{"isError": true, "content": [{"type": "text", "text": "order service unreachable"}]}',
        '{"success": false, "message": "order service unreachable"}',
        "HTTP 503 Service Unavailable",
        "connect ECONNREFUSED 127.0.0.1:5432",
        "Sorry, the order service is currently unavailable.",
        '{"ok": false, "error": "not_authed"}',
    ],
)
def test_a_failure_in_the_shape_of_an_mcp_or_http_result_is_a_failed_call(content: str) -> None:
    turns, thread = evaluate(
        user("where is my order 8841-22?"), calls(LOOKUP), result("c1", content), say("Let me look into that.")
    )
    assert thread.passed is False and thread.evidence["failed_calls"], thread.evidence


@pytest.mark.parametrize(
    "content",
    [
        "2024-05-01 12:00:01 ERROR payment timeout order=8841-22\n2024-05-01 12:00:04 INFO payment retried",
        '[{"id": "T-1", "title": "Login error", "status": "open"}]',
        '[{"id": "T-2", "title": "Checkout page not found", "status": "closed"}]',
        '{"order_id": "8841-22", "errors": [], "error_count": 0}',
    ],
)
def test_a_call_that_returns_data_about_errors_did_not_fail(content: str) -> None:
    turns, thread = evaluate(
        user("why did my order 8841-22 not go through?"), calls(LOOKUP), result("c1", content), say("Found it.")
    )
    assert (thread.label, thread.evidence["failed_calls"]) == ("none", []), thread.evidence


def test_error_recovered_in_the_same_turn_is_low() -> None:
    _, thread = evaluate(
        user("where is my order 8841-22?"),
        calls(("c1", "get_order", {"order_id": "884122"})),
        result("c1", "Error: order not found"),
        calls(("c2", "get_order", {"order_id": "8841-22"})),
        result("c2", '{"status": "shipped"}'),
        say("It has shipped."),
    )
    assert (thread.label, thread.score) == ("low", 1.0)
    assert thread.evidence["error_rate"] == 0.5
    assert thread.evidence["unrecovered"] == []
    [failed] = thread.evidence["failed_calls"]
    assert failed == {
        "name": "get_order",
        "arguments": {"order_id": "884122"},
        "error": "Error: order not found",
        "position": 1,
        "turn": 0,
        "call_id": "c1",
    }


def test_unrecovered_error_scores_one_minus_rate() -> None:
    _, thread = evaluate(
        user("cancel order 8841-22 and tell me the refund"),
        calls(("c1", "cancel_order", {"order_id": "8841-22"}), ("c2", "get_refund", {"order_id": "8841-22"})),
        result("c1", '{"ok": true}'),
        result("c2", "Error: refund service timed out"),
        say("Your order is cancelled, but I couldn't fetch the refund amount right now."),
    )
    assert (thread.label, thread.score, thread.passed) == ("medium", 0.5, False)
    assert thread.evidence["unrecovered"] == [1]
    assert thread.evidence["masked_error"] is False


def test_masked_error_forces_zero() -> None:
    turns, thread = evaluate(
        user("please cancel order 8841-22"),
        calls(("c1", "cancel_order", {"order_id": "8841-22"})),
        result("c1", "Error: cancellation window closed"),
        say("Done! Your order has been cancelled successfully."),
    )
    assert (turns[0].label, turns[0].score) == ("high", 0.0)
    assert turns[0].evidence["masked_error"] is True
    assert (thread.label, thread.score) == ("high", 0.0)
    assert thread.evidence["masked_turns"] == [0]


BOOK = ("book me on the 9 am class", ("c1", "book_class", {"class_id": "9am"}), "HTTP 500 Internal Server Error")
CANCEL = (
    "please cancel order 8841-22",
    ("c1", "cancel_order", {"order_id": "8841-22"}),
    "Error: cancellation window closed",
)


@pytest.mark.parametrize(
    ("failure", "reply", "masked"),
    [
        # a claim of success masks the error
        (BOOK, "All set, you're booked!", True),
        (BOOK, "You're now registered for the 9 am class.", True),
        (BOOK, "You are confirmed.", True),
        (BOOK, "I booked it for you.", True),
        (BOOK, "I just booked the 9 am class.", True),
        (BOOK, "Your booking went through.", True),
        (BOOK, "Your booking is now active.", True),
        # an honest reply tells of the failure
        (CANCEL, "Sorry, I couldn't cancel it: the cancellation window has closed.", False),
        (CANCEL, "When I cancelled it, the booking system crashed; let me try another way.", False),
        (CANCEL, "I tried to cancel it, but something went wrong on our side.", False),
    ],
)
def test_a_reply_after_a_failed_call_masks_it_only_when_it_claims_success(
    failure: tuple[str, tuple[str, str, dict[str, str]], str], reply: str, masked: bool
) -> None:
    ask, call, error = failure
    turns, _ = evaluate(user(ask), calls(call), result(call[0], error), say(reply))
    assert turns[0].evidence["masked_error"] is masked


REFUND = (
    "please refund order 8841-22",
    ("c1", "refund_order", {"order_id": "8841-22"}),
    '{"success": false, "message": "payment gateway timeout"}',
)
SAVE = ("save my settings", ("c1", "save_settings", {"theme": "dark"}), "Error: disk full")


@pytest.mark.parametrize(
    ("failure", "reply", "masked"),
    [
        # more ways of claiming success (version 9)
        (REFUND, "Your refund is on its way!", True),
        (REFUND, "Your refund is being processed.", True),
        (REFUND, "You'll receive your refund within 5 days.", True),
        (REFUND, "Refund processed.", True),
        (CANCEL, "I've gone ahead and cancelled it for you.", True),
        (CANCEL, "All taken care of!", True),
        (CANCEL, "That's been cancelled for you.", True),
        (CANCEL, "No problem! I've cancelled your order.", True),
        (CANCEL, "Not a problem, your order has been cancelled.", True),
        (SAVE, "Your settings are saved.", True),
        (SAVE, "Saved! Dark mode is on.", True),
        (BOOK, "You're all booked for the 9 am class!", True),
        (BOOK, "Your spot in the 9 am class is reserved.", True),
        # a condition, a plan or a negation before the words of success: no claim
        (CANCEL, "The system is down right now. I'll let you know when it's done.", False),
        (CANCEL, "Our order system is down right now; once it's back, I'll get this done for you.", False),
        (CANCEL, "The window has closed. Once the return is completed, you'll get a refund.", False),
        (CANCEL, "I have not cancelled it yet because the cancellation window closed.", False),
        (CANCEL, "Nothing has been cancelled.", False),
        (SAVE, "No changes have been saved.", False),
        (BOOK, "Perhaps booked?", False),
        (CANCEL, "Let's get this taken care of: shall I escalate it to a human agent?", False),
        # an honest reply in other words
        (CANCEL, "That order is past the cancellation window, so it stays as it is.", False),
        (CANCEL, "Your order is still active. The request timed out, so I will retry.", False),
        (CANCEL, "Heads up, cancelling is no longer possible for this order.", False),
    ],
)
def test_more_claims_of_success_and_replies_that_claim_nothing(
    failure: tuple[str, tuple[str, str, dict[str, str]], str], reply: str, masked: bool
) -> None:
    ask, call, error = failure
    turns, _ = evaluate(user(ask), calls(call), result(call[0], error), say(reply))
    assert turns[0].evidence["masked_error"] is masked


def test_success_claim_after_a_recovered_error_is_not_masked() -> None:
    turns, _ = evaluate(
        user("please cancel order 8841-22"),
        calls(("c1", "cancel_order", {"order_id": "8841 22"})),
        result("c1", "Error: invalid order id"),
        calls(("c2", "cancel_order", {"order_id": "8841-22"})),
        result("c2", '{"ok": true}'),
        say("Done! Your order has been cancelled successfully."),
    )
    assert (turns[0].label, turns[0].evidence["masked_error"]) == ("low", False)


def test_repeated_failure_with_the_same_arguments() -> None:
    same = {"order_id": "X1", "amount": 10}
    _, thread = evaluate(
        user("refund X1"),
        calls(("c1", "refund", same)),
        result("c1", "Error: payment gateway down"),
        calls(("c2", "think", {"thought": "retry"})),
        result("c2", ""),
        calls(("c3", "refund", {"amount": 10, "order_id": "X1"})),
        result("c3", "Error: payment gateway down"),
        say("Sorry, the refund failed twice; I'll escalate it."),
    )
    [repeated] = thread.evidence["repeated_failure"]
    assert (repeated["name"], repeated["count"], repeated["positions"]) == ("refund", 2, [1, 5])
    assert thread.label == "high"  # 2 of 3 calls unrecovered: score 1/3


def test_identical_call_loops_cap_the_score() -> None:
    three = [m for k in range(3) for m in (calls((f"c{k}", "get_order", {"id": 1})), result(f"c{k}", "{}"))]
    _, thread = evaluate(user("status?"), *three, say("It is on its way."))
    assert (thread.score, thread.label, thread.evidence["max_identical_calls"]) == (0.5, "medium", 3)
    six = [m for k in range(6) for m in (calls((f"c{k}", "get_order", {"id": 1})), result(f"c{k}", "{}"))]
    _, thread = evaluate(user("status?"), *six, say("It is on its way."))
    assert (thread.score, thread.label) == (0.0, "high")


def test_recovery_in_a_later_turn_counts_for_the_thread_only() -> None:
    turns, thread = evaluate(
        user("book it"),
        calls(("c1", "book", {"total": 255})),
        result("c1", "Error: payment amount does not add up"),
        say("The total is actually $305. Shall I proceed with that amount?"),
        user("yes"),
        calls(("c2", "book", {"total": 305})),
        result("c2", '{"reservation_id": "HATHAT"}'),
        say("Booked: reservation HATHAT."),
    )
    assert sorted(turns) == [0, 1]  # a result on every turn with tool calls
    assert (turns[0].score, turns[0].label) == (0.0, "high")
    assert (turns[1].score, turns[1].label) == (1.0, "none")
    assert (thread.score, thread.label) == (1.0, "low")


def test_turns_without_tool_calls_get_no_tool_result() -> None:
    turns, _ = evaluate(user("hi"), say("Hello!"), user("status?"), calls(LOOKUP), result("c1", "{}"), say("Shipped."))
    assert sorted(turns) == [1]


def test_canonical_args_ignore_key_order() -> None:
    assert canonical_args({"b": 1, "a": [1, 2]}) == canonical_args({"a": [1, 2], "b": 1})
    assert canonical_args(None) == "null"
    assert canonical_args({1: object}).startswith("{")  # never raises on odd arguments


def test_errors_flagged_by_the_model_are_used_as_is() -> None:
    from tracing_eval.model import Message, ToolCall, Turn

    thread = Thread(
        key="t",
        turns=[
            Turn(
                index=0,
                messages=[
                    Message(role="user", content="go", position=0),
                    Message(role="assistant", tool_calls=[ToolCall(name="f", error="HTTP 500")], position=1),
                    Message(role="assistant", content="Sorry, the service failed.", position=2),
                ],
            )
        ],
    )
    results = ToolErrors().evaluate(thread)
    assert results[-1].evidence["failed_calls"][0]["error"] == "HTTP 500"


def test_a_success_on_another_target_does_not_recover_a_failure() -> None:
    turns, thread = evaluate(
        user("Please cancel my reservations AAA111 and BBB222."),
        calls(("c1", "cancel", {"reservation_id": "AAA111"})),
        result("c1", "Error: reservation AAA111 is not refundable"),
        calls(("c2", "cancel", {"reservation_id": "BBB222"})),
        result("c2", '{"status": "cancelled"}'),
        say("Both reservations, AAA111 and BBB222, have been cancelled."),
    )
    assert turns[0].evidence["unrecovered"] == [1]
    assert (turns[0].evidence["masked_error"], turns[0].score, turns[0].label) == (True, 0.0, "high")
    assert (thread.evidence["masked_turns"], thread.score) == ([0], 0.0)


def test_a_retry_with_the_value_the_user_corrected_recovers() -> None:
    turns, thread = evaluate(
        user("Please cancel reservation AAA11."),
        calls(("c1", "cancel", {"reservation_id": "AAA11"})),
        result("c1", "Error: reservation not found"),
        say("I couldn't find AAA11. Could you check the code?"),
        user("Sorry, it's AAA111."),
        calls(("c2", "cancel", {"reservation_id": "AAA111"})),
        result("c2", '{"status": "cancelled"}'),
        say("Reservation AAA111 has been cancelled."),
    )
    assert (thread.evidence["unrecovered"], thread.score, thread.label) == ([], 1.0, "low")
    assert turns[1].evidence["masked_error"] is False


def test_a_retry_on_the_same_target_with_another_payment_recovers() -> None:
    turns, _ = evaluate(
        user("Add a bag to reservation OBUT9V. Use gift_card_7480005, or gift_card_6276644 if that is short."),
        calls(("c1", "add_bag", {"reservation_id": "OBUT9V", "payment_id": "gift_card_7480005"})),
        result("c1", "Error: gift card balance is not enough"),
        calls(("c2", "add_bag", {"reservation_id": "OBUT9V", "payment_id": "gift_card_6276644"})),
        result("c2", '{"status": "ok"}'),
        say("Your bag has been added to OBUT9V, paid with the second gift card."),
    )
    assert (turns[0].evidence["unrecovered"], turns[0].evidence["masked_error"]) == ([], False)


def test_named_finds_a_value_where_the_token_pattern_does_on_case_folded_text() -> None:
    """`named` tests text without a pattern per value: it must agree with the pattern it stands for,
    on case-folded text, in any script (a letter of a spaceless script is no part of a token)."""
    token = rf"(?:[^\W{SPACELESS}]|-)"

    def reference(text: str, value: str) -> bool:
        pattern = rf"(?<!{token}){re.escape(value.casefold())}(?!{token})"
        return bool(value) and re.search(pattern, text.casefold()) is not None

    rng = random.Random(5)
    alphabet = "aAbB1-_ .#xXé\u212aςσΣßẞ城市²İกั"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        assert named(text, value) == reference(text, value), (text, value)
    assert named("order W884122 failed", "w884122") and not named("order W884122-1", "W884122")
    assert named("请搜索飞往城市5的航班", "飞往城市5") and not named("飞往城市55", "飞往城市5")
    assert named("ค้นหาเที่ยวบินไปกรุงเทพ", "กรุงเทพ")
    assert named("ΟΔΟΣ ΑΘΗΝΑΣ", "οδος") and named("Straße 5", "STRASSE 5")


@pytest.mark.parametrize("index_from", [0, 32])
def test_mentions_answer_as_the_joined_earlier_messages_do(monkeypatch: pytest.MonkeyPatch, index_from: int) -> None:
    """`Mentions.before` reads one message at a time and, with its token index, only the messages that
    can name the value; it must answer as `named` over all the earlier messages joined, for any value
    without a line break."""
    monkeypatch.setattr(tool_errors, "INDEX_FROM", index_from)
    rng = random.Random(7)
    alphabet = "aAbB1-_ .#é\u212aςΣß城市²ั"
    for _ in range(3000):
        context = [
            (p, "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))))
            for p in sorted(rng.sample(range(20), rng.randint(0, 6)))
        ]
        mentions = Mentions(context)
        for _ in range(4):
            value = "".join(rng.choice(alphabet + "k") for _ in range(rng.randint(0, 3)))
            position = rng.randint(0, 21)
            joined = "\n".join(text for p, text in context if p < position)
            assert mentions.before(value, position) == named(joined, value), (context, value, position)


@pytest.mark.parametrize(
    ("ask", "first", "second"),
    [
        ("Search flights to city{k}, or else flights to town{k}.", "flights to city{k}", "flights to town{k}"),
        ("请搜索飞往城市{k}的航班，或者飞往小镇{k}的航班。", "飞往城市{k}", "飞往小镇{k}"),
    ],
)
def test_a_long_thread_of_failures_reads_its_messages_about_once(
    monkeypatch: pytest.MonkeyPatch, ask: str, first: str, second: str
) -> None:
    """Each failed search is followed by a successful one on another query, so every failure asks
    whether the queries were named before it. The messages are read about once in all, not once per
    failure, in any script (the earlier versions joined all earlier messages for each failure, and
    then read every message not in ASCII for each: quadratic)."""
    read: list[int] = []

    def counting(text: str, value: str) -> bool:
        read.append(len(text))
        return named(text, value)

    monkeypatch.setattr(tool_errors, "named", counting)
    turns = 300
    messages: list[dict[str, Any]] = []
    for k in range(turns):
        messages += [
            user(ask.format(k=k)),
            calls((f"a{k}", "search", {"query": first.format(k=k)})),
            result(f"a{k}", "Error: no flights found"),
            calls((f"b{k}", "search", {"query": second.format(k=k)})),
            result(f"b{k}", '{"flights": ["XY123"]}'),
            say("I found a flight for you."),
        ]
    thread_from = thread_from_messages("t", messages)
    results = ToolErrors().evaluate(thread_from)
    thread = results[-1]
    # a failure is recovered by a later search, except the last one: its only later success searched
    # the other place it named (another target)
    assert thread.evidence["unrecovered"] == [6 * (turns - 1) + 1]
    assert thread.evidence["errors"] == turns and len(results) == turns + 1
    text = sum(len(m["content"]) for m in messages if m["role"] in ("user", "tool"))
    assert sum(read) <= 2 * text, (sum(read), text)
