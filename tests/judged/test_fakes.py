"""The ScriptedJudge drives the real client: parse, one re-ask, then JudgeError; batches get one part per metric."""

from typing import Any

import pytest

from tests.support.fakes.openai_server import Reply
from tests.support.scripted_judge import ScriptedJudge, strict_schema_problems, verdict_last
from tracing_eval.metrics.judged.base import Judge, JudgeError, JudgeRequest, MalformedAnswer

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"], "additionalProperties": False}


def parse(data: Any) -> str:
    if not isinstance(data, dict) or "x" not in data:
        raise MalformedAnswer("no x")
    return data["x"]


def request(metric: str = "m") -> JudgeRequest:
    return JudgeRequest(metric, "the transcript", "the instructions", SCHEMA)


def test_is_a_judge() -> None:
    assert isinstance(ScriptedJudge({}), Judge)


async def test_parses_and_bills_what_the_server_counted() -> None:
    judge = ScriptedJudge({"m": [{"x": "a"}]})
    value, usage = await judge.ask(request(), parse)
    [sent] = judge.requests
    assert (value, usage.calls) == ("a", 1)
    assert (usage.input_tokens, usage.output_tokens) == judge.billed() and usage.input_tokens > 0
    assert (sent.metric, sent.transcript, sent.instructions, sent.reask) == (
        "m",
        "the transcript",
        "the instructions",
        False,
    )
    assert judge.unused() == {}


async def test_reasks_once_on_a_malformed_answer() -> None:
    judge = ScriptedJudge({"m": ["oops", {"x": "b"}]})
    value, usage = await judge.ask(request(), parse)
    assert (value, usage.calls, [r.reask for r in judge.requests]) == ("b", 2, [False, True])


async def test_two_malformed_answers_raise_judge_error_with_their_usage() -> None:
    judge = ScriptedJudge({"m": ["oops", {"y": 1}]})
    with pytest.raises(JudgeError, match="missing: x") as caught:
        await judge.ask(request(), parse)
    assert caught.value.usage.calls == 2


async def test_scripted_failures_are_http_errors_and_running_dry_is_recorded() -> None:
    judge = ScriptedJudge({"m": [Reply.failure(500, "down"), RuntimeError("timeout")]})
    with pytest.raises(JudgeError, match="down"):
        await judge.ask(request(), parse)
    with pytest.raises(JudgeError, match="timeout"):
        await judge.ask(request(), parse)
    with pytest.raises(JudgeError):
        await judge.ask(request(), parse)
    assert judge.dry == ["m"]


def test_strict_schema_problems_and_verdict_order() -> None:
    assert strict_schema_problems({"type": "object", "properties": {"a": {"type": "string"}}}) == [
        "$: additionalProperties must be false",
        "$: required must list every property",
    ]
    first = {"type": "object", "properties": {"verdict": {}, "reason": {}}}
    assert not verdict_last(first) and verdict_last({"type": "object", "properties": {"reason": {}, "verdict": {}}})
