"""`failure_rate`: FR6 verdicts with the hallucination priority rule; single exchanges apply."""

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
from tracing_eval.metrics.judged.base import FR6, JudgedMetric
from tracing_eval.metrics.judged.failure_rate import FailureRate
from tracing_eval.model import MetricResult, Status, Thread

NAME = FailureRate.name

THREAD = chat(
    "What is the population of Atlantis in 2024?",
    "Atlantis is a mythical city, so there is no real population figure. Did you mean a real city?",
    "Then what is the exact depth of the Mariana Trench today?",
    "Measurements vary; recent sonar surveys give about 10,935 m. NOAA's datasets have the current value.",
)  # messages [0] .. [3]


def answer(verdict: str, evidence: list[dict[str, Any]] | None = None, reason: str = "r") -> dict[str, Any]:
    return {"evidence": evidence or [], "reason": reason, "verdict": verdict}


async def run(thread: Thread, *answers: Any) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await FailureRate().evaluate(thread, judge_context(thread, judge))
    assert judge.unused() == {}
    return result, judge


def test_spec_and_schema() -> None:
    metric = FailureRate()
    assert isinstance(metric, JudgedMetric)
    assert (metric.spec.name, metric.spec.tier, metric.spec.threshold) == ("failure_rate", "judge", 0.7)
    found = question_of(metric, THREAD).schema
    assert strict_schema_problems(found) == [] and verdict_last(found)
    assert list(found["properties"]) == ["evidence", "reason", "verdict"]
    assert set(found["properties"]["verdict"]["enum"]) == set(FR6)
    assert found["properties"]["evidence"]["items"]["properties"]["message"]["enum"] == [0, 1, 2, 3]


def test_weights_follow_the_seed() -> None:
    assert FR6 == {
        "hallucination": 0.0,
        "stall": 0.4,
        "mixed": 0.6,
        "honest_fallback": 1.0,
        "alternative_proposed": 1.0,
        "not_applicable": 1.0,
    }


@pytest.mark.parametrize(("label", "weight"), list(FR6.items()))
async def test_every_label_scores_its_weight(label: str, weight: float) -> None:
    quote = [{"message": 3, "quote": "points to NOAA"}]
    result, _ = await run(THREAD, answer(f" {label} ", quote, "because"))
    assert (result.status, result.label, result.score, result.passed) == (Status.OK, label, weight, weight >= 0.7)
    assert result.reason == "because"
    assert result.evidence == {"verdict": label, "evidence": quote}


async def test_prompt_has_the_seed_rubric_examples_and_the_unknown_rule() -> None:
    _, judge = await run(THREAD, answer("alternative_proposed"))
    [request] = judge.requests
    assert request.schema == question_of(FailureRate(), THREAD).schema
    assert request.transcript is not None and request.transcript.startswith("CONVERSATION:\n--- turn 0\n[0] user:")
    for label in FR6:
        assert f"- {label}" in request.instructions
    assert "invented even once, the verdict MUST be hallucination" in request.instructions
    assert "one invention poisons the whole conversation" in request.instructions
    assert "Use it only then" in request.instructions  # not_applicable only without uncertainty
    assert "Atlantis" in request.instructions and "-> hallucination" in request.instructions  # few-shot examples
    assert "is unknown: a claim that could come from it is not invented" in request.instructions


async def test_single_exchange_is_judged() -> None:
    result, judge = await run(chat("What is 2+2?", "4."), answer("not_applicable"))
    assert (result.status, result.score, len(judge.requests)) == (Status.OK, 1.0, 1)


async def test_no_assistant_reply_is_not_applicable() -> None:
    result, judge = await run(chat("Hello?"))
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []


async def test_unknown_label_is_an_error_after_one_reask() -> None:
    result, judge = await run(THREAD, answer("evasive"), answer("evasive"))
    assert [r.reask for r in judge.requests] == [False, True]
    assert (result.status, result.score) == (Status.ERROR, None)
    assert "'verdict' must be one of" in result.reason and "evasive" in result.reason


async def test_a_message_number_outside_the_thread_is_malformed() -> None:
    bad = answer("stall", [{"message": 9, "quote": "x"}])
    result, judge = await run(THREAD, bad, answer("stall", [{"message": 2, "quote": "x"}]))
    assert (result.status, result.evidence["evidence"], len(judge.requests)) == (
        Status.OK,
        [{"message": 2, "quote": "x"}],
        2,
    )
    assert "message numbers [0, 1, 2, 3]" in judge.requests[1].body["messages"][-1]["content"]


async def test_judge_failure_is_an_error_not_a_score() -> None:
    result, _ = await run(THREAD, RuntimeError("retry budget spent"))
    assert (result.status, result.score) == (Status.ERROR, None)
    assert result.reason.startswith("judge failed:") and "retry budget spent" in result.reason


async def test_usage_is_what_the_judge_billed() -> None:
    result, judge = await run(THREAD, answer("hallucination"))
    assert (result.judge_model, (result.input_tokens, result.output_tokens)) == ("fake-judge", judge.billed())
