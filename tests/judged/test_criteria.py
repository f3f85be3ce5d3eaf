"""L10 custom criteria: `criterion:<name>`, a 0-10 G-Eval score or a yes/no aspect critic, one call."""

from typing import Any

import pytest

from tests.support.scripted_judge import ScriptedJudge, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.config import CriterionSettings
from tracing_eval.metrics.judged.base import JudgedMetric
from tracing_eval.metrics.judged.criteria import CriterionMetric, criterion_metric
from tracing_eval.model import MetricResult, Scope, Status

PRICES = "Does the assistant quote prices that match the official list, and correct itself when told?"
THREAD = chat("How much is the Pro plan?", "The Pro plan is $20 a month.", "The site says $25.", "You're right, $25.")


def geval(**extra: Any) -> CriterionSettings:
    return CriterionSettings(name="price_accuracy", kind="geval", definition=PRICES, **extra)


def critic(**extra: Any) -> CriterionSettings:
    return CriterionSettings(name="polite", kind="critic", definition="Is the assistant polite throughout?", **extra)


async def run(settings: CriterionSettings, *answers: Any) -> tuple[MetricResult, ScriptedJudge]:
    metric = criterion_metric(settings)
    judge = ScriptedJudge({metric.spec.name: list(answers)})
    [result] = await metric.evaluate(THREAD, judge_context(THREAD, judge))
    assert judge.unused() == {}
    return result, judge


def test_factory_builds_a_judged_metric_with_its_own_spec() -> None:
    a, b = criterion_metric(geval()), criterion_metric(critic(threshold=0.5))
    assert isinstance(a, CriterionMetric) and isinstance(a, JudgedMetric)
    assert (a.spec.name, a.spec.tier, a.spec.scopes, a.spec.threshold) == (
        "criterion:price_accuracy",
        "judge",
        ("thread",),
        0.7,
    )
    assert (b.spec.name, b.spec.threshold) == ("criterion:polite", 0.5)
    assert PRICES in a.spec.description


async def test_geval_prompt_and_score() -> None:
    result, judge = await run(geval(), {"reason": "corrected itself at [4]", "score": 8})
    [request] = judge.requests
    assert request.metric == "criterion:price_accuracy"
    assert (
        f'"{PRICES}"' in request.instructions
        and "0 (not at all)" in request.instructions
        and "10 (fully" in request.instructions
    )
    assert strict_schema_problems(request.schema) == [] and verdict_last(request.schema)
    assert (result.metric, result.scope, result.score, result.passed, result.label) == (
        "criterion:price_accuracy",
        Scope.THREAD,
        0.8,
        True,
        None,
    )
    assert result.reason == "corrected itself at [4]"
    assert result.evidence == {"kind": "geval", "raw_score": 8, "definition": PRICES}
    assert (result.judge_model, (result.input_tokens, result.output_tokens)) == ("fake-judge", judge.billed())


async def test_geval_low_score_fails_and_integral_floats_are_accepted() -> None:
    result, _ = await run(geval(), {"score": 6.0, "reason": "wrong price first"})
    assert (result.score, result.passed) == (0.6, False)


async def test_geval_threshold_from_config() -> None:
    result, _ = await run(geval(threshold=0.5), {"score": 6, "reason": "ok"})
    assert (result.threshold, result.passed) == (0.5, True)


@pytest.mark.parametrize(
    "bad", [{"score": 11, "reason": "x"}, {"score": "8", "reason": "x"}, {"score": 7.5, "reason": "x"}, {"score": 8}]
)
async def test_geval_out_of_scale_is_an_error(bad: dict[str, Any]) -> None:
    result, judge = await run(geval(), bad, bad)
    assert len(judge.requests) == 2
    assert (result.status, result.score, result.passed) == (Status.ERROR, None, None)
    assert result.reason.startswith("judge failed:")


@pytest.mark.parametrize(("verdict", "score", "passed"), [("yes", 1.0, True), ("no", 0.0, False), ("Yes", 1.0, True)])
async def test_critic_is_binary(verdict: str, score: float, passed: bool) -> None:
    result, judge = await run(critic(), {"verdict": verdict, "reason": "because"})
    assert "Is the assistant polite throughout?" in judge.requests[0].instructions
    assert "yes or no" in judge.requests[0].instructions
    assert strict_schema_problems(judge.requests[0].schema) == []
    assert (result.metric, result.score, result.label, result.passed) == (
        "criterion:polite",
        score,
        verdict.lower(),
        passed,
    )
    assert result.evidence["verdict"] == verdict.lower()


async def test_critic_unknown_label_is_an_error_with_reason() -> None:
    result, _ = await run(critic(), {"verdict": "maybe", "reason": "x"}, {"verdict": "partly", "reason": "x"})
    assert result.status == Status.ERROR
    assert "'verdict' must be one of yes, no" in result.reason


async def test_no_reply_is_not_applicable_without_a_call() -> None:
    thread = chat("hello?")
    metric = criterion_metric(critic())
    judge = ScriptedJudge({})
    [result] = await metric.evaluate(thread, judge_context(thread, judge))
    assert (result.status, result.metric) == (Status.NOT_APPLICABLE, "criterion:polite")
    assert judge.requests == []
