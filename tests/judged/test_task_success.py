"""`task_success`: goal -> criteria -> V5+ verdicts -> score_agg; steps skipped by given values."""

from typing import Any

import orjson
import pytest

from tests.support.scripted_judge import ScriptedJudge, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.judged.base import V5_PLUS, JudgedMetric
from tracing_eval.metrics.judged.task_success import Criteria, Goal, TaskSuccess, verdicts_answer
from tracing_eval.model import MetricResult, Status, Thread
from tracing_eval.transcripts import thread_from_json_line

NAME = TaskSuccess.name

MESSAGES = (
    "Book me a flight to Paris for next Monday.",
    "Here are three options: [flights with prices]",
    "I'll take the 9 am one.",
    "Booked. Confirmation #AB123, departing next Monday at 9:00.",
)
THREAD = chat(*MESSAGES)
GOAL = {"goal": "The user wants a flight to Paris booked for next Monday."}
CRITERIA = {"criteria": ["Available flights with prices are shown", "The booking is confirmed with its date"]}
TASK = "Book a round trip to Paris for next Monday"
GIVEN = ["The assistant showed flights with prices", "The assistant confirmed the booking with dates"]


def verdicts(*labels: str) -> dict[str, Any]:
    return {f"criterion_{i}": {"reason": f"{label} reason", "verdict": label} for i, label in enumerate(labels, 1)}


async def run(
    thread: Thread, *answers: Any, options: dict[str, Any] | None = None
) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await TaskSuccess().evaluate(thread, judge_context(thread, judge, options=options))
    assert judge.unused() == {}
    return result, judge


def test_spec_and_schemas() -> None:
    metric = TaskSuccess()
    assert isinstance(metric, JudgedMetric)
    assert (metric.spec.name, metric.spec.tier, metric.spec.threshold) == ("task_success", "judge", 0.7)
    two = verdicts_answer(2).response_schema()
    for schema in (Goal.response_schema(), Criteria.response_schema(), two):
        assert strict_schema_problems(schema) == [] and verdict_last(schema)
    assert list(two["properties"]) == ["criterion_1", "criterion_2"]  # exactly one verdict per criterion
    assert two["properties"]["criterion_1"]["properties"]["verdict"]["enum"] == list(V5_PLUS)


async def test_default_pipeline_is_three_calls_and_criteria_come_from_the_goal_alone() -> None:
    result, judge = await run(THREAD, GOAL, CRITERIA, verdicts("fully", "partial"))
    goal, criteria, verdict = judge.requests
    assert "ONE concise sentence" in goal.instructions
    assert f'"{GOAL["goal"]}"' in criteria.instructions and "add a second ONLY when" in criteria.instructions
    assert "Book a round-trip flight to Paris" in criteria.instructions  # the seed's example
    assert criteria.transcript is None and MESSAGES[3] not in criteria.body["messages"][-1]["content"]
    assert '1. "Available flights with prices are shown"\n2. "The booking is confirmed' in verdict.instructions
    assert "criterion_1, criterion_2" in verdict.instructions and "END of the conversation" in verdict.instructions
    for label in V5_PLUS:
        assert f"- {label}:" in verdict.instructions
    assert goal.transcript == verdict.transcript  # one shared prefix
    assert (result.status, result.score, result.passed, result.label) == (Status.OK, 0.85, True, None)
    assert result.reason == "1. fully: fully reason 2. partial: partial reason"
    assert result.evidence == {
        "task_description": GOAL["goal"],
        "task_description_source": "llm_inferred",
        "success_criteria": CRITERIA["criteria"],
        "success_criteria_source": "llm_inferred",
        "verdicts": [
            {"criterion": CRITERIA["criteria"][0], "verdict": "fully", "weight": 1.0, "reason": "fully reason"},
            {"criterion": CRITERIA["criteria"][1], "verdict": "partial", "weight": 0.7, "reason": "partial reason"},
        ],
        "temperature": 0.5,
    }
    assert ((result.input_tokens, result.output_tokens), result.judge_model) == (judge.billed(), "fake-judge")


async def test_task_description_skips_goal_inference() -> None:
    result, judge = await run(THREAD, CRITERIA, verdicts("fully", "fully"), options={"task_description": TASK})
    assert len(judge.requests) == 2
    assert f'"{TASK}"' in judge.requests[0].instructions and judge.requests[0].transcript is None
    assert result.evidence["task_description"] == TASK
    assert (result.evidence["task_description_source"], result.evidence["success_criteria_source"]) == (
        "user_provided",
        "llm_inferred",
    )


async def test_success_criteria_skip_generation_but_not_the_goal() -> None:
    result, judge = await run(THREAD, GOAL, verdicts("fully", "none"), options={"success_criteria": GIVEN})
    assert len(judge.requests) == 2
    assert '1. "The assistant showed flights' in judge.requests[1].instructions
    assert (result.evidence["task_description_source"], result.evidence["success_criteria_source"]) == (
        "llm_inferred",
        "user_provided",
    )
    assert (result.score, result.passed) == (0.4204, False)  # one of two criteria unmet fails 0.7


async def test_both_given_on_the_eval_line_is_one_call() -> None:
    line = orjson.dumps(
        {
            "thread_id": "x",
            "task_description": TASK,
            "success_criteria": GIVEN,
            "turns": [{"role": r, "content": t} for r, t in zip(["user", "assistant"] * 2, MESSAGES, strict=True)],
        }
    )
    thread = thread_from_json_line(line, 1)
    result, judge = await run(thread, verdicts("fully", "mostly"))
    [request] = judge.requests
    assert TASK in request.instructions and GIVEN[1] in request.instructions
    assert result.evidence["success_criteria"] == GIVEN
    assert (result.evidence["task_description_source"], result.evidence["success_criteria_source"]) == (
        "user_provided",
        "user_provided",
    )
    assert result.score == 0.95
    assert (result.input_tokens, result.output_tokens) == judge.billed()


async def test_thread_metadata_wins_over_config_options() -> None:
    thread = chat(*MESSAGES, metadata={"task_description": "from the line"})
    result, judge = await run(
        thread, verdicts("fully"), options={"task_description": "from config", "success_criteria": "one criterion"}
    )
    assert result.evidence["task_description"] == "from the line"
    assert result.evidence["success_criteria"] == ["one criterion"]
    assert "from config" not in judge.requests[0].instructions


@pytest.mark.parametrize(("label", "weight"), list(V5_PLUS.items()))
async def test_single_criterion_scores_its_weight(label: str, weight: float) -> None:
    opts = {"task_description": TASK, "success_criteria": ["Booked"]}
    result, _ = await run(THREAD, verdicts(label.capitalize()), options=opts)
    assert (result.status, result.score, result.passed) == (Status.OK, weight, weight >= 0.7)
    assert result.evidence["verdicts"][0]["verdict"] == label


@pytest.mark.parametrize(
    ("temperature", "score", "passed"), [(0.1, 0.0, False), (0.5, 0.4204, False), (1.0, 0.8666, True)]
)
async def test_temperature_option(temperature: float, score: float, passed: bool) -> None:
    opts = {"task_description": TASK, "success_criteria": GIVEN, "temperature": temperature}
    result, _ = await run(THREAD, verdicts("fully", "none"), options=opts)
    assert (result.score, result.passed, result.evidence["temperature"]) == (score, passed, temperature)


async def test_temperature_above_one_and_a_half_never_exceeds_one() -> None:
    opts = {"task_description": TASK, "success_criteria": GIVEN, "temperature": 2.0}
    result, _ = await run(THREAD, verdicts("fully", "none"), options=opts)
    assert result.score == 0.8666


async def test_a_missing_verdict_is_malformed_not_padded() -> None:
    opts = {"task_description": TASK, "success_criteria": GIVEN}
    result, judge = await run(THREAD, verdicts("fully"), verdicts("fully"), options=opts)
    assert len(judge.requests) == 2
    assert result.status == Status.ERROR and result.score is None
    assert "missing: criterion_2" in result.reason


async def test_a_missing_verdict_then_all_of_them_is_ok() -> None:
    opts = {"task_description": TASK, "success_criteria": GIVEN}
    result, judge = await run(THREAD, verdicts("fully"), verdicts("fully", "mostly"), options=opts)
    assert (result.status, result.score, result.input_tokens) == (Status.OK, 0.95, judge.billed()[0])


async def test_unknown_verdict_label_is_an_error() -> None:
    opts = {"task_description": TASK, "success_criteria": ["Booked"]}
    result, _ = await run(THREAD, verdicts("done"), verdicts("yes"), options=opts)
    assert (
        result.status == Status.ERROR
        and "'criterion_1.verdict' must be one of" in result.reason
        and "yes" in result.reason
    )


async def test_too_many_criteria_is_malformed() -> None:
    three = {"criteria": ["a", "b", "c"]}
    result, judge = await run(THREAD, GOAL, three, three)
    assert len(judge.requests) == 3
    assert result.status == Status.ERROR and "expected 1 to 2 criteria" in result.reason


async def test_failure_mid_pipeline_keeps_the_usage_spent() -> None:
    result, judge = await run(THREAD, GOAL, RuntimeError("timeout"))
    assert (result.status, result.input_tokens) == (Status.ERROR, judge.billed()[0])
    assert result.reason.startswith("judge failed:") and "timeout" in result.reason and result.input_tokens > 0


@pytest.mark.parametrize(
    "options",
    [{"temperature": "hot"}, {"temperature": True}, {"task_description": 3}, {"success_criteria": ["ok", ""]}],
)
async def test_bad_options_are_errors_without_calls(options: dict[str, Any]) -> None:
    result, judge = await run(THREAD, options=options)
    assert result.status == Status.ERROR and result.reason.startswith("invalid option") and judge.requests == []


async def test_single_exchange_applies() -> None:
    result, judge = await run(
        chat("Write a regex for emails.", "Use [^@\\s]+@[^@\\s]+\\.\\w+"), GOAL, CRITERIA, verdicts("mostly", "mostly")
    )
    assert (result.status, result.score, len(judge.requests)) == (Status.OK, 0.9, 3)


async def test_without_an_assistant_reply_it_is_not_applicable() -> None:
    result, judge = await run(chat("Hello?"))
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []
