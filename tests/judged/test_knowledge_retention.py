"""L3 `knowledge_retention`: one call over the numbered thread; a verdict for every fact-dependent reply."""

from typing import Any

import pytest

from tests.support.scripted_judge import ScriptedJudge, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.deterministic.reask import Reask
from tracing_eval.metrics.judged.knowledge_retention import KnowledgeRetention
from tracing_eval.model import MetricResult, Status, Thread

NAME = KnowledgeRetention.name

# The article's return chat: the order number given at [2] is asked for again at [7].
RETURN = chat(
    "I want to return an order that arrived damaged.",
    "Sorry about that. Can you share the order number?",
    "It's #4471.",
    "Got it. Damaged on arrival, or after use?",
    "On arrival. The screen was cracked.",
    "Understood. Replacement or refund?",
    "Refund. How long does that take?",
    "3-5 business days. Can you share the order number again?",
)


def verdict(message: int, label: str, fact: str = "order #4471") -> dict[str, Any]:
    return {"message": message, "fact": fact, "reason": f"{label} at {message}", "verdict": label}


def answer(first: int | None, *verdicts: dict[str, Any], reason: str = "overall") -> dict[str, Any]:
    return {"first_fact_message": first, "verdicts": list(verdicts), "reason": reason}


async def run(
    *answers: Any, thread: Thread = RETURN, deterministic: list[MetricResult] | None = None
) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await KnowledgeRetention().evaluate(thread, judge_context(thread, judge, deterministic=deterministic))
    assert judge.unused() == {}
    return result, judge


async def test_prompt_states_rules_two_and_three_and_the_labels() -> None:
    _, judge = await run(answer(0))
    [request] = judge.requests
    text = request.instructions
    assert "- ok:" in text and "- forgot:" in text and "- contradicted:" in text
    assert "asks again for information the user already gave" in text  # rule 2
    assert "clarify" in text and "confirm" in text  # rule 3
    assert "give a verdict for EVERY assistant reply after it that depends on a fact" in text
    assert "rule-based" not in text  # no hints without the deterministic tier
    assert strict_schema_problems(request.schema) == [] and verdict_last(request.schema)
    props = request.schema["properties"]
    assert props["verdicts"]["items"]["properties"]["message"]["enum"] == [1, 3, 5, 7]  # the replies
    assert props["first_fact_message"]["anyOf"] == [{"type": "integer", "enum": [0, 2, 4, 6]}, {"type": "null"}]


async def test_deterministic_reasks_are_hints() -> None:
    _, judge = await run(answer(0), deterministic=Reask().evaluate(RETURN))
    text = judge.requests[0].instructions
    assert "A rule-based check flagged" in text
    assert 'message [7] asks for the order_number given at message [2] (value "4471")' in text


async def test_reask_of_a_known_fact_is_forgot() -> None:
    judged = [verdict(3, "ok"), verdict(5, "ok"), verdict(7, "forgot"), verdict(1, "ok")]
    result, _ = await run(answer(0, *judged, reason="asked for the order again"))
    assert (result.score, result.label, result.passed) == (0.75, "forgot", True)
    assert result.reason == "asked for the order again"
    assert result.evidence["bad_messages"] == [7]
    assert result.evidence["bad_turns"] == [3]
    assert result.evidence["judged_messages"] == [1, 3, 5, 7]
    assert [v["verdict"] for v in result.evidence["verdicts"]] == ["ok", "ok", "forgot", "ok"]


async def test_only_the_replies_the_judge_gave_a_verdict_count() -> None:
    # replies that do not depend on a fact get no verdict, and no free pass either
    result, _ = await run(answer(2, verdict(7, "forgot")))
    assert (result.score, result.label, result.evidence["judged_messages"]) == (0.0, "forgot", [7])


async def test_contradiction_wins_the_label_and_a_message_counts_once() -> None:
    result, _ = await run(
        answer(
            2,
            verdict(3, "ok"),
            verdict(5, "forgot", fact="screen cracked"),
            verdict(5, "contradicted"),
            verdict(7, "forgot"),
        )
    )
    # judged after [2]: [3], [5], [7]; bad: [5] (at its worst, contradicted), [7]
    assert (result.score, result.label, result.passed) == (0.3333, "contradicted", False)
    assert result.evidence["bad_messages"] == [5, 7]


async def test_all_ok_is_retained() -> None:
    result, judge = await run(answer(0, verdict(1, "ok"), verdict(7, "ok")))
    assert (result.score, result.label, result.status) == (1.0, "retained", Status.OK)
    assert (result.judge_model, result.input_tokens) == ("fake-judge", judge.billed()[0])


@pytest.mark.parametrize("first", [None, 0])
async def test_no_fact_dependent_reply_is_not_applicable_after_the_call(first: int | None) -> None:
    thread = chat("hi", "Hello! How can I help?", "what can you do?", "I answer questions about orders.")
    result, judge = await run(answer(first), thread=thread)
    assert result.status == Status.NOT_APPLICABLE and result.evidence == {"first_fact_message": first}
    assert len(judge.requests) == 1 and result.input_tokens == judge.billed()[0]


async def test_single_exchange_is_not_applicable_without_a_call() -> None:
    thread = chat("My order is #4471, where is it?", "It ships tomorrow.")
    result, judge = await run(thread=thread)
    assert result.status == Status.NOT_APPLICABLE
    assert judge.requests == []


@pytest.mark.parametrize(
    "bad",
    [
        answer(0, verdict(7, "amnesia")),  # unknown label
        answer(0, verdict(42, "ok")),  # no such message
        answer(0, verdict(2, "forgot")),  # a user message
        answer(4, verdict(3, "forgot")),  # a reply before the first fact
        answer(1),  # the first fact is not a user message
        answer(None, verdict(7, "forgot")),  # a verdict, with no fact
        {"first_fact_message": 0, "verdicts": {"7": "forgot"}, "reason": "x"},  # wrong shape
    ],
)
async def test_malformed_twice_is_an_error(bad: dict[str, Any]) -> None:
    result, judge = await run(bad, bad)
    assert len(judge.requests) == 2
    assert (result.status, result.score, result.label) == (Status.ERROR, None, None)
    assert result.reason.startswith("judge failed:")


async def test_unknown_label_reason_names_the_labels() -> None:
    result, _ = await run(answer(0, verdict(7, "amnesia")), answer(0, verdict(7, "amnesia")))
    assert "'verdicts.0.verdict' must be one of ok, forgot, contradicted" in result.reason


async def test_reask_after_malformed_answer_sums_usage() -> None:
    result, judge = await run(answer(0, verdict(7, "amnesia")), answer(0, verdict(5, "ok"), verdict(7, "forgot")))
    assert (result.status, result.score) == (Status.OK, 0.5)
    assert (result.input_tokens, result.output_tokens) == judge.billed() and len(judge.requests) == 2
