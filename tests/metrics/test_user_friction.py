"""D5 `user_friction`: repeats, frustration and escalation, shouting."""

import pytest

from tracing_eval.metrics.deterministic.user_friction import FRUSTRATION, UserFriction, shouting
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_messages


def chat(*texts: str) -> Thread:
    return thread_from_messages(
        "t", [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    )


def evaluate(*user_texts: str) -> tuple[dict[int, MetricResult], MetricResult]:
    texts: list[str] = []
    for text in user_texts:
        texts += [text, "Okay, let me look into that for you."]
    results = UserFriction().evaluate(chat(*texts))
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


def test_calm_thread_has_no_friction() -> None:
    turns, thread = evaluate("I need to change my flight.", "It's the one on May 20 to Seattle.", "Thanks, that works.")
    assert (thread.label, thread.score, thread.passed) == ("none", 1.0, True)
    assert all(r.label == "none" for r in turns.values())


def test_repeating_an_earlier_request_is_flagged() -> None:
    turns, thread = evaluate(
        "I want to cancel my flight to Seattle tomorrow.",
        "Can you check the baggage allowance?",
        "I want to cancel my flight to Seattle tomorrow!",
    )
    assert turns[2].evidence["flags"] == ["repeat"]
    assert (thread.score, thread.evidence["flagged_turns"]) == (0.5, [2])
    assert thread.evidence["friction_rate"] == 0.5


def test_confirmations_are_not_repeats() -> None:
    turns, _ = evaluate(
        "Please change my seat to 12A.", "Yes, please proceed with the change.", "Yes, please proceed with the change."
    )
    assert turns[2].label == "none"


@pytest.mark.parametrize(
    "text",
    [
        "I already told you my order number.",
        "Like I said, it's the Seattle flight.",
        "That's not what I asked.",
        "Are you even listening?",
        "This is useless.",
        "Can I talk to a human?",
        "Please transfer me to a live agent.",
        "representative",
        "Why is this so hard!!!",
        "I had to explain it again and again",
    ],
)
def test_frustration_and_escalation(text: str) -> None:
    assert FRUSTRATION.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "What jazz artist are you listening to?",
        "How does it feel not to be human?",
        "Can you check the price again tomorrow",
    ],
)
def test_not_frustration(text: str) -> None:
    assert not FRUSTRATION.search(text)


def test_shouting_needs_enough_capital_letters() -> None:
    assert shouting("WHY IS MY REFUND NOT HERE YET")
    assert not shouting("My ID is ZFA04Y")
    assert not shouting("OK")


def test_rate_counts_follow_up_turns_only() -> None:
    turns, thread = evaluate("I'm so frustrated with this airline.", "My reservation is ZFA04Y.", "Seattle, May 20.")
    assert turns[0].evidence == {"flags": ["frustration"], "counted_in_rate": False}
    assert (thread.score, thread.label) == (1.0, "none")


def test_single_user_turn_gets_a_turn_result_and_no_thread_rate() -> None:
    results = UserFriction().evaluate(chat("HELP ME NOW PLEASE", "Sure."))
    assert [(r.scope, r.label) for r in results if r.status == Status.OK] == [(Scope.TURN, "friction")]
    assert results[-1].status == Status.NOT_APPLICABLE


def test_no_user_messages_is_not_applicable() -> None:
    [result] = UserFriction().evaluate(Thread(key="empty"))
    assert result.status == Status.NOT_APPLICABLE
