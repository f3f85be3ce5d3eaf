"""D3 `refusal_loop`: runs of refusals, on the none/partial/fully scale."""

import pytest

from tracing_eval.metrics.deterministic.refusal_loop import WEIGHTS, RefusalLoop, is_refusal, runs
from tracing_eval.model import Status, Thread
from tracing_eval.transcripts import thread_from_messages

REFUSE = "I can't help with that request."


def chat(*texts: str) -> Thread:
    return thread_from_messages(
        "t", [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    )


def run(*replies: str):
    texts: list[str] = []
    for k, reply in enumerate(replies):
        texts += [f"user message number {k}", reply]
    [result] = RefusalLoop().evaluate(chat(*texts))
    return result


def test_weights() -> None:
    assert WEIGHTS == {"none": 1.0, "partial": 0.7, "fully": 0.0}


def test_refusal_loop_is_fully() -> None:
    result = run(REFUSE, "I'm sorry, but I cannot assist with this.", "As an AI, I am unable to provide that.")
    assert (result.label, result.score, result.passed) == ("fully", 0.0, False)
    assert result.evidence["longest_run"] == 3
    assert result.evidence["refusal_messages"] == [1, 3, 5]


def test_two_refusals_then_recovery_is_partial() -> None:
    result = run(REFUSE, REFUSE, "Here is a general overview of the refund policy instead.")
    assert (result.label, result.score, result.passed) == ("partial", 0.7, True)
    assert result.evidence["runs"] == [{"positions": [1, 3], "length": 2}]


def test_ending_on_two_refusals_is_fully() -> None:
    result = run("Sure, here is your itinerary.", REFUSE, REFUSE)
    assert (result.label, result.evidence["longest_run"], result.evidence["ends_in_refusal"]) == ("fully", 2, True)


def test_isolated_refusals_are_none() -> None:
    result = run(REFUSE, "Here is what I can do.", REFUSE, "Done, your seat is changed.")
    assert (result.label, result.score) == ("none", 1.0)
    assert result.evidence["refusals"] == 2


@pytest.mark.parametrize(
    "text",
    [
        "I can\u2019t assist with that.",
        "I am unable to process a full refund for a basic economy ticket.",
        "I'm sorry, but that is not possible.",
        "That is outside my scope.",
        "I can only help with airline reservations.",
        "I don't have access to your bank records.",
        "I'm not allowed to share that information.",
    ],
)
def test_refusal_phrases(text: str) -> None:
    assert is_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "I can help with that!",
        "I'm sorry to hear that. Let me fix it.",
        "I can't wait for the weekend.",
        "No problem, done.",
    ],
)
def test_non_refusals(text: str) -> None:
    assert not is_refusal(text)


def test_runs() -> None:
    assert runs([True, True, False, True]) == [(0, 2), (3, 1)]
    assert runs([]) == []


def test_no_replies_is_not_applicable() -> None:
    [result] = RefusalLoop().evaluate(Thread(key="empty"))
    assert result.status == Status.NOT_APPLICABLE
