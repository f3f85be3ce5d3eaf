"""The shared ScriptedJudge behaves like the real client: parse, one re-ask, then JudgeError."""

from typing import Any

import pytest

from tests.judged.fakes import ScriptedJudge, strict_schema_problems
from tracing_eval.metrics.judged.base import Judge, JudgeError, JudgeRequest, MalformedAnswer


def parse(data: Any) -> str:
    if not isinstance(data, dict) or "x" not in data:
        raise MalformedAnswer("no x")
    return data["x"]


def request(metric: str = "m") -> JudgeRequest:
    return JudgeRequest(metric, "transcript", "instructions", {"type": "object"})


def test_is_a_judge() -> None:
    assert isinstance(ScriptedJudge({}), Judge)


async def test_parses_and_bills_one_call() -> None:
    judge = ScriptedJudge({"m": [{"x": "a"}]})
    value, usage = await judge.ask(request(), parse)
    assert (value, usage.calls, usage.input_tokens) == ("a", 1, 100)
    assert judge.requests == [request()] and judge.unused() == {}


async def test_reasks_once_on_a_malformed_answer() -> None:
    judge = ScriptedJudge({"m": ["oops", {"x": "b"}]})
    value, usage = await judge.ask(request(), parse)
    assert (value, usage.calls, len(judge.requests)) == ("b", 2, 2)


async def test_two_malformed_answers_raise_judge_error() -> None:
    judge = ScriptedJudge({"m": ["oops", {"y": 1}]})
    with pytest.raises(JudgeError, match="no x"):
        await judge.ask(request(), parse)


async def test_scripted_exception_is_raised_and_running_dry_is_a_test_bug() -> None:
    judge = ScriptedJudge({"m": [JudgeError("timeout")]})
    with pytest.raises(JudgeError, match="timeout"):
        await judge.ask(request(), parse)
    with pytest.raises(AssertionError, match="no answer left"):
        await judge.ask(request(), parse)


def test_strict_schema_problems() -> None:
    assert strict_schema_problems({"type": "object", "properties": {"a": {"type": "string"}}}) == [
        "$: additionalProperties must be false",
        "$: required must list every property",
    ]
