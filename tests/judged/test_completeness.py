"""L2 `completeness`: one call listing intentions; fulfilled / (fulfilled + unfulfilled)."""

from typing import Any

import pytest

from tests.support.scripted_judge import ScriptedJudge, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.judged.completeness import Completeness
from tracing_eval.model import MetricResult, Scope, Status

NAME = Completeness.name

THREAD = chat(
    "I need to change my delivery address and check my refund.",
    "Done, the address is now 12 Elm St. Which order is the refund for?",
    "Forget the refund, just tell me when the parcel arrives.",
    "It should arrive on Friday.",
)


def intention(status: str, *messages: int, text: str = "something") -> dict[str, Any]:
    return {"intention": text, "messages": list(messages), "reason": f"{status} because", "status": status}


def answer(*intentions: dict[str, Any], reason: str = "overall") -> dict[str, Any]:
    return {"intentions": list(intentions), "reason": reason}


async def run(*answers: Any) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await Completeness().evaluate(THREAD, judge_context(THREAD, judge))
    assert judge.unused() == {}
    return result, judge


async def test_prompt_lists_the_statuses_after_the_shared_transcript() -> None:
    _, judge = await run(answer())
    [request] = judge.requests
    assert request.transcript is not None and request.transcript.startswith("CONVERSATION:\n--- turn 0")
    for status in ("fulfilled", "withdrawn", "unfulfilled"):
        assert f"- {status}:" in request.instructions
    assert "[0]" not in request.instructions  # instructions only; the transcript is the prefix
    assert request.schema["properties"]["intentions"]["items"]["properties"]["status"]["enum"] == [
        "fulfilled",
        "withdrawn",
        "unfulfilled",
    ]
    assert request.schema["properties"]["intentions"]["items"]["properties"]["messages"]["items"]["enum"] == [
        0,
        1,
        2,
        3,
    ]
    assert strict_schema_problems(request.schema) == [] and verdict_last(request.schema)


async def test_withdrawn_intentions_do_not_count() -> None:
    result, _ = await run(
        answer(
            intention("fulfilled", 0, 1, text="change address"),
            intention("withdrawn", 0, 2, text="refund"),
            intention("fulfilled", 2, 3, text="delivery date"),
            reason="everything still wanted was done",
        )
    )
    assert (result.score, result.label, result.passed, result.scope) == (1.0, "complete", True, Scope.THREAD)
    assert result.reason == "everything still wanted was done"
    assert (result.evidence["fulfilled"], result.evidence["withdrawn"], result.evidence["unfulfilled"]) == (2, 1, 0)
    assert result.evidence["intentions"][1] == {
        "intention": "refund",
        "messages": [0, 2],
        "reason": "withdrawn because",
        "status": "withdrawn",
    }


async def test_unfulfilled_intentions_lower_the_score() -> None:
    result, _ = await run(answer(intention("fulfilled", 1), intention("unfulfilled", 2), intention("fulfilled", 3)))
    assert (result.score, result.label, result.passed, result.threshold) == (0.6667, "incomplete", False, 0.7)


@pytest.mark.parametrize("intentions", [[], [intention("withdrawn", 0)]])
async def test_nothing_pending_scores_one(intentions: list[dict[str, Any]]) -> None:
    result, _ = await run(answer(*intentions))
    assert (result.score, result.label) == (1.0, "complete")


async def test_usage_and_model_are_recorded() -> None:
    result, judge = await run(answer(intention("fulfilled", 1)))
    assert (result.judge_model, (result.input_tokens, result.output_tokens)) == ("fake-judge", judge.billed())


async def test_one_malformed_answer_is_reasked() -> None:
    result, judge = await run(answer(intention("maybe", 1)), answer(intention("unfulfilled", 1)))
    assert len(judge.requests) == 2
    assert (result.status, result.score, result.input_tokens) == (Status.OK, 0.0, judge.billed()[0])


@pytest.mark.parametrize(
    "bad",
    [
        answer(intention("done", 1)),  # unknown label
        answer(intention("fulfilled", 99)),  # no such message
        {"intentions": "all of them", "reason": "x"},  # wrong shape
        {"intentions": [intention("fulfilled", 1)]},  # no reason
    ],
)
async def test_malformed_twice_is_an_error_not_a_score(bad: dict[str, Any]) -> None:
    result, judge = await run(bad, bad)
    assert len(judge.requests) == 2
    assert (result.status, result.score, result.passed) == (Status.ERROR, None, None)
    assert result.reason.startswith("judge failed:")
    assert result.error and result.error.startswith("JudgeError")


async def test_unknown_label_reason_names_the_labels() -> None:
    result, _ = await run(answer(intention("done", 1)), answer(intention("done", 1)))
    assert "'intentions.0.status' must be one of fulfilled, withdrawn, unfulfilled" in result.reason


@pytest.mark.parametrize("texts", [("hello",), ()])
async def test_no_reply_is_not_applicable_without_a_call(texts: tuple[str, ...]) -> None:
    thread = chat(*texts)
    judge = ScriptedJudge({})
    [result] = await Completeness().evaluate(thread, judge_context(thread, judge))
    assert result.status == Status.NOT_APPLICABLE
    assert judge.requests == []
