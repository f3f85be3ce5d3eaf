"""`failure_rate`: FR6 verdicts with the hallucination priority rule; single exchanges apply."""

from typing import Any

import pytest

from tests.judged.fakes import ScriptedJudge, chat, judge_context, strict_schema_problems
from tracing_eval.metrics.judged.base import FR6, JudgedMetric, JudgeError
from tracing_eval.metrics.judged.failure_rate import NAME, SCHEMA, FailureRate
from tracing_eval.model import MetricResult, Status, Thread

THREAD = chat(
    "What is the population of Atlantis in 2024?",
    "Atlantis is a mythical city, so there is no real population figure. Did you mean a real city?",
    "Then what is the exact depth of the Mariana Trench today?",
    "Measurements vary; recent sonar surveys give about 10,935 m. NOAA's datasets have the current value.",
)


def answer(verdict: str, evidence: list[str] | None = None, reason: str = "r") -> dict[str, Any]:
    return {"verdict": verdict, "evidence": evidence or [], "reason": reason}


async def run(thread: Thread, *answers: Any) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await FailureRate().evaluate(thread, judge_context(thread, judge))
    assert judge.unused() == {}
    return result, judge


def test_spec_and_schema() -> None:
    metric = FailureRate()
    assert isinstance(metric, JudgedMetric)
    assert (metric.spec.name, metric.spec.tier, metric.spec.threshold) == ("failure_rate", "judge", 0.7)
    assert strict_schema_problems(SCHEMA) == []
    assert set(SCHEMA["properties"]["verdict"]["enum"]) == set(FR6)


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
    result, _ = await run(THREAD, answer(f" {label} ", ["[3] points to NOAA"], "because"))
    assert (result.status, result.label, result.score, result.passed) == (Status.OK, label, weight, weight >= 0.7)
    assert result.reason == "because"
    assert result.evidence == {"verdict": label, "evidence": ["[3] points to NOAA"]}


async def test_prompt_has_every_label_and_the_priority_rule() -> None:
    _, judge = await run(THREAD, answer("alternative_proposed"))
    [request] = judge.requests
    assert request.schema == SCHEMA and request.transcript.startswith("CONVERSATION (2 turns")
    for label in FR6:
        assert f"- {label}:" in request.instructions
    assert "invented even once, the verdict MUST be hallucination" in request.instructions
    assert "Use it only then" in request.instructions  # not_applicable only without uncertainty


async def test_single_exchange_is_judged() -> None:
    result, judge = await run(chat("What is 2+2?", "4."), answer("not_applicable"))
    assert (result.status, result.score, len(judge.requests)) == (Status.OK, 1.0, 1)


async def test_no_assistant_reply_is_not_applicable() -> None:
    result, judge = await run(chat("Hello?"))
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []


async def test_unknown_label_is_an_error() -> None:
    result, judge = await run(THREAD, answer("evasive"), answer("evasive"))
    assert len(judge.requests) == 2
    assert (result.status, result.score) == (Status.ERROR, None)
    assert "'verdict' must be one of" in result.reason and "evasive" in result.reason


async def test_malformed_twice_is_an_error() -> None:
    result, _ = await run(THREAD, ["hallucination"], {"verdict": "stall", "evidence": "one string", "reason": ""})
    assert result.status == Status.ERROR and "evidence" in result.reason


async def test_judge_failure_is_an_error_not_a_score() -> None:
    result, _ = await run(THREAD, JudgeError("retry budget spent"))
    assert (result.status, result.score, result.reason) == (Status.ERROR, None, "judge failed: retry budget spent")


async def test_usage_is_recorded() -> None:
    result, _ = await run(THREAD, answer("hallucination"))
    assert (result.judge_model, result.input_tokens, result.output_tokens, result.cost_usd) == (
        "fake-judge",
        100,
        20,
        0.001,
    )
