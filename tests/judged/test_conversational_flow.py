"""`conversational_flow`: one holistic V5+ verdict; needs two exchanges."""

from typing import Any

import pytest

from tests.support.scripted_judge import (
    ScriptedJudge,
    chat,
    judge_context,
    question_of,
    strict_schema_problems,
    verdict_last,
)
from tracing_eval.metrics.judged.base import V5_PLUS, JudgedMetric
from tracing_eval.metrics.judged.conversational_flow import ConversationalFlow
from tracing_eval.model import MetricResult, Status, Thread

NAME = ConversationalFlow.name

THREAD = chat(
    "I need a flight to Paris next Monday.",
    "Here are three options with prices: 7:00 ($210), 9:00 ($240), 18:30 ($190).",
    "The 9 am one.",
    "Booked: Monday 9:00 to Paris, confirmation AB123.",
)


ISSUE = {"issue": "skips the seat question", "messages": [3]}


def answer(verdict: str, issues: list[dict[str, Any]] | None = None, reason: str = "r") -> dict[str, Any]:
    return {"key_issues": issues or [], "reason": reason, "verdict": verdict}


async def run(thread: Thread, *answers: Any) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await ConversationalFlow().evaluate(thread, judge_context(thread, judge))
    assert judge.unused() == {}
    return result, judge


def test_spec_and_schema() -> None:
    metric = ConversationalFlow()
    schema = question_of(metric, THREAD).schema
    assert isinstance(metric, JudgedMetric)
    assert (metric.spec.name, metric.spec.tier, metric.spec.threshold) == ("conversational_flow", "judge", 0.7)
    assert strict_schema_problems(schema) == [] and verdict_last(schema)
    assert schema["properties"]["key_issues"]["items"]["properties"]["messages"]["items"]["enum"] == [0, 1, 2, 3]
    assert schema["properties"]["verdict"]["enum"] == ["fully", "mostly", "partial", "minor", "none"]


def test_weights_follow_the_seed() -> None:
    assert V5_PLUS == {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}


@pytest.mark.parametrize(("label", "weight"), list(V5_PLUS.items()))
async def test_every_label_scores_its_weight(label: str, weight: float) -> None:
    result, _ = await run(THREAD, answer(label, [ISSUE], "smooth"))
    assert (result.status, result.label, result.score, result.passed) == (Status.OK, label, weight, weight >= 0.7)
    assert result.reason == "smooth"
    assert result.evidence == {"verdict": label, "key_issues": [ISSUE]}


async def test_prompt_has_every_label_the_rules_and_the_seed_examples() -> None:
    _, judge = await run(THREAD, answer("fully"))
    [request] = judge.requests
    assert request.schema == question_of(ConversationalFlow(), THREAD).schema
    assert request.transcript is not None and request.transcript.startswith("CONVERSATION:\n--- turn 0")
    for label in V5_PLUS:
        assert f"- {label}:" in request.instructions
    for rule in ("as a whole", "one badly broken turn pulls the verdict down", "Later turns weigh more", "verbosity"):
        assert rule in request.instructions
    for example in ("-> fully", "KeyError", "-> partial", "favourite colour", "-> none"):
        assert example in request.instructions


async def test_single_exchange_is_not_applicable() -> None:
    result, judge = await run(chat("Hi", "Hello! How can I help?"))
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []


async def test_unknown_label_is_an_error() -> None:
    result, judge = await run(THREAD, answer("great"), answer("excellent"))
    assert len(judge.requests) == 2
    assert (result.status, result.score, result.label) == (Status.ERROR, None, None)
    assert "excellent" in result.reason


async def test_malformed_then_valid_is_ok_with_summed_usage() -> None:
    result, judge = await run(THREAD, {"key_issues": [], "reason": 3, "verdict": "fully"}, answer("mostly"))
    assert (result.status, result.score) == (Status.OK, 0.9)
    assert ((result.input_tokens, result.output_tokens), result.judge_model) == (judge.billed(), "fake-judge")


async def test_malformed_twice_is_an_error() -> None:
    result, _ = await run(THREAD, None, {"verdict": "fully"})
    assert result.status == Status.ERROR and "key_issues" in result.reason
