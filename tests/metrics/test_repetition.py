"""D1 `repetition`: the §9 cases of metrics.md plus edge cases."""

from typing import Any

import pytest

from tracing_eval.metrics.deterministic.repetition import WEIGHTS, Repetition, find_repeats
from tracing_eval.metrics.deterministic.views import replies
from tracing_eval.model import Status, Thread
from tracing_eval.transcripts import thread_from_messages

TRIED = "Have you tried clearing the cache and restarting the app?"
CLEAR = "Please clear the cache and restart the app."
PARAPHRASE = "Maybe clear the app cache, then restart it."
REINSTALL = "Then let's reinstall it: open Settings, choose Apps, uninstall it, and download it again from the store."
USERS = [
    "My app keeps crashing on startup.",
    "I did that already, it still crashes.",
    "Still crashing. What else can I do?",
]


def chat(*texts: str, system: str | None = None) -> Thread:
    """Alternate user/assistant messages, starting with the user."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return thread_from_messages("t", msgs)


def support(*replies: str) -> Thread:
    texts: list[str] = []
    for user, reply in zip(USERS, replies, strict=False):
        texts += [user, reply]
    return chat(*texts)


def run(thread: Thread, threshold: float | None = None):
    [result] = Repetition(threshold).evaluate(thread)
    return result


def pairs(result) -> list[tuple[int, int, float]]:
    return [(p["first_turn"], p["repeat_turn"], p["similarity"]) for p in result.evidence["pairs"]]


def test_weights_follow_the_seed() -> None:
    assert WEIGHTS == {"none": 1.0, "minor": 0.9, "partial": 0.7, "mostly": 0.3, "fully": 0.0}


def test_loop_is_fully() -> None:
    result = run(support(TRIED, CLEAR, TRIED))
    assert (result.label, result.score, result.passed) == ("fully", 0.0, False)
    assert pairs(result) == [(0, 1, 0.8), (0, 2, 1.0)]
    assert result.evidence["repeated_messages"] == [3, 5]
    assert result.evidence["max_similarity"] == 1.0


def test_recovered_loop_is_partial() -> None:
    result = run(support(TRIED, CLEAR, REINSTALL))
    assert (result.label, result.score, result.passed) == ("partial", 0.7, True)
    assert pairs(result) == [(0, 1, 0.8)]
    assert result.evidence["repeated_messages"] == [3]


def test_clean_thread_is_none() -> None:
    result = run(
        support(
            TRIED,
            "Which version of the app do you have? You can see it under Settings, About.",
            REINSTALL,
        )
    )
    assert (result.label, result.score, result.passed) == ("none", 1.0, True)
    assert result.evidence["repeated_messages"] == []
    assert result.evidence["max_similarity"] < 0.5


def test_consistent_answer_to_a_repeated_question_is_neutral() -> None:
    answer = "Go to Settings, choose Security and click Reset password."
    result = run(chat("How do I reset my password?", answer, "How do I reset my password?", answer))
    assert (result.label, result.score) == ("none", 1.0)
    assert result.evidence["repeated_messages"] == []
    assert len(result.evidence["neutral_pairs"]) == 1


def test_last_reply_repeating_is_mostly() -> None:
    result = run(support(TRIED, REINSTALL, TRIED))
    assert (result.label, result.score) == ("mostly", 0.3)
    assert result.evidence["repeated_messages"] == [5]


def test_paraphrase_is_minor() -> None:
    result = run(support(TRIED, PARAPHRASE, REINSTALL))
    assert (result.label, result.score, result.passed) == ("minor", 0.9, True)
    [pair] = result.evidence["pairs"]
    assert pair["kind"] == "rehash"
    assert pair["similarity"] == pytest.approx(0.5455)


def test_echoing_the_users_topic_is_not_a_rehash() -> None:
    thread = chat(
        "I love stardew valley, it's my favourite farming game.",
        "My favorite game is stardew valley too. Farming games are relaxing.",
        "What do you like about it?",
        "Stardew valley is a game I can pick back up at any time.",
    )
    assert run(thread).label == "none"


def test_positions_count_system_and_tool_call_only_messages() -> None:
    thread = thread_from_messages(
        "t",
        [
            {"role": "system", "content": "You are a support bot."},
            {"role": "user", "content": USERS[0]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
            {"role": "assistant", "content": TRIED},
            {"role": "user", "content": USERS[1]},
            {"role": "assistant", "content": CLEAR},
            {"role": "user", "content": USERS[2]},
            {"role": "assistant", "content": TRIED},
        ],
    )
    result = run(thread)
    assert result.label == "fully"
    assert result.evidence["repeated_messages"] == [6, 8]
    assert result.evidence["replies_compared"] == 3


def test_repeats_outside_the_window_are_ignored() -> None:
    distinct = [
        "Open the network panel and toggle the airplane switch twice.",
        "Check whether the display brightness slider moves at all.",
        "Play a test sound from the speaker settings page.",
        "Clear the browser history from the privacy dashboard.",
        "Calibrate the battery by draining it fully overnight.",
        "Free some disk space by deleting old downloads.",
        "Remap the caps lock key in the keyboard preferences.",
    ]
    texts: list[str] = []
    answers = [TRIED, *distinct, TRIED]
    for k, reply in enumerate(answers):
        texts += [f"Question number {k} about something else entirely {k}", reply]
    thread = chat(*texts)
    assert run(thread).label == "none"  # the window is 6 replies: reply 8 does not see reply 0
    items = replies(thread)
    user_text = {t.index: t.user_text for t in thread.turns}
    [wide] = find_repeats(items, user_text, window=10)[0]
    assert (wide.first.turn, wide.repeat.turn, wide.similarity) == (0, 8, 1.0)


def test_repeated_segments_list_sentences_shared_by_replies() -> None:
    closing = "Let me know if the app still crashes after that."
    result = run(
        support(
            f"{TRIED} {closing}", f"{REINSTALL} {closing}", "Which phone model and Android version do you use exactly?"
        )
    )
    [segment] = result.evidence["repeated_segments"]
    assert segment["text"] == closing
    assert segment["count"] == 2
    assert segment["positions"] == [1, 3]


def test_threshold_override() -> None:
    assert run(support(TRIED, CLEAR, REINSTALL), threshold=0.95).passed is False
    assert Repetition().spec.threshold == 0.7
    assert Repetition(0.5).spec.threshold == 0.5


@pytest.mark.parametrize(
    "thread",
    [
        Thread(key="empty"),
        chat("hello?"),
        chat("hi", "ok", "hi", "ok"),
        thread_from_messages(
            "tools",
            [
                {"role": "user", "content": "do it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
                },
            ],
        ),
    ],
)
def test_nothing_to_compare_is_not_applicable(thread: Thread) -> None:
    result = run(thread)
    assert result.status == Status.NOT_APPLICABLE
    assert result.score is None
    assert result.reason


def test_single_long_reply_is_not_applicable() -> None:
    assert run(chat(USERS[0], TRIED)).status == Status.NOT_APPLICABLE


def test_same_template_about_a_different_reservation_is_not_a_repeat() -> None:
    template = "The reservation {} is in basic economy, which cannot be modified to change flights or cabin class."
    thread = chat(
        "Can you upgrade all my reservations?",
        template.format("NM1VX1"),
        "What about the next one?",
        template.format("KC18K6"),
        "And the last one?",
        template.format("H8Q05L"),
    )
    result = run(thread)
    assert result.label == "none"
    assert result.evidence["max_similarity"] >= 0.8  # lexically close, but each reply is about another booking
    same = chat("Upgrade NM1VX1?", template.format("NM1VX1"), "Please try again", template.format("NM1VX1"))
    assert run(same).label == "mostly"
