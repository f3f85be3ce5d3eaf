"""L9 `tool_error_handling`: one call per turn where `tool_errors` found a failure, concurrent."""

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from tests.judged.fakes import ScriptedJudge, judge_context, strict_schema_problems
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.judged.base import JudgeError, JudgeRequest, JudgeUsage, MalformedAnswer
from tracing_eval.metrics.judged.tool_error_handling import NAME, ToolErrorHandling
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_messages

T = TypeVar("T")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": fn}]}


def result(cid: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


THREAD = thread_from_messages(
    "t",
    [
        user("Where is my order 8841?"),
        call("c1", "get_order", {"order_id": "8841"}),
        result("c1", "Error: order not found"),
        say("Sorry, I could not find order 8841. Could you check the number?"),
        user("It's 8841-22."),
        call("c2", "get_order", {"order_id": "8841-22"}),
        result("c2", '{"status": "shipped"}'),
        say("It has shipped."),
        user("Cancel it then."),
        call("c3", "cancel_order", {"order_id": "8841-22"}),
        result("c3", '{"error": "already shipped"}'),
        say("Done! Your order has been cancelled."),
        user("Thanks."),
        say("You're welcome."),
    ],
)  # tool errors in turns 0 and 2


def verdict(handled: bool, severity: str = "none", *types: str, reason: str = "because") -> dict[str, Any]:
    return {"handled": handled, "error_types": list(types), "severity": severity, "reason": reason}


def first_turn() -> list[dict[str, Any]]:
    return [
        user("Where is my order 8841?"),
        call("c1", "get_order", {"order_id": "8841"}),
        result("c1", "Error: order not found"),
        say("Sorry, I could not find order 8841."),
    ]


GOOD = verdict(True, "none", reason="explained and asked for the number")
MASKED = verdict(False, "high", "result_ignored", "error_handling", reason="claims a cancellation that failed")


def judged_turn(request: JudgeRequest) -> int:
    match = re.search(r"tool error handling in turn (\d+)", request.instructions)
    assert match, request.instructions
    return int(match.group(1))


class RoutingJudge:
    """Answers by the turn named in the instructions, after a delay, counting the calls in flight."""

    def __init__(self, answers: dict[int, Any], model: str = "fake-judge") -> None:
        self.model = model
        self.answers = answers
        self.requests: list[JudgeRequest] = []
        self.in_flight = self.max_in_flight = 0

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1
        answer = self.answers[judged_turn(request)]
        if isinstance(answer, BaseException):
            raise answer
        try:
            return parse(answer), JudgeUsage(calls=1, input_tokens=100, output_tokens=20, cost_usd=0.001)
        except MalformedAnswer as exc:
            raise JudgeError(str(exc)) from exc


async def run(
    judge: Any,
    thread: Thread = THREAD,
    *,
    deterministic: list[MetricResult] | None = None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
) -> list[MetricResult]:
    ctx = judge_context(
        thread, judge, deterministic=ToolErrors().evaluate(thread) if deterministic is None else deterministic
    )
    ctx.reuse = reuse or {}
    return await ToolErrorHandling().evaluate(thread, ctx)


def split(results: list[MetricResult]) -> tuple[dict[int, MetricResult], MetricResult]:
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN and r.turn_index is not None}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


async def test_only_failing_turns_are_judged_concurrently() -> None:
    judge = RoutingJudge({0: GOOD, 2: MASKED})
    turns, whole = split(await run(judge))
    assert sorted(judged_turn(r) for r in judge.requests) == [0, 2]
    assert judge.max_in_flight == 2
    assert list(turns) == [0, 2]
    assert (turns[0].score, turns[0].label, turns[0].passed) == (1.0, "handled", True)
    assert (turns[2].score, turns[2].label, turns[2].passed) == (0.0, "high", False)
    assert turns[2].reason == "claims a cancellation that failed"
    assert turns[2].evidence["error_types"] == ["error_handling", "result_ignored"]
    assert turns[2].evidence["failed_calls"][0]["name"] == "cancel_order"
    assert (whole.score, whole.label, whole.passed) == (0.5, "high", False)
    assert whole.evidence["unhandled_turns"] == [2]
    assert (whole.input_tokens, whole.output_tokens, whole.cost_usd) == (200, 40, 0.002)
    assert turns[0].input_tokens == 100 and whole.judge_model == "fake-judge"


async def test_prompt_renders_the_tool_history_reply_and_findings() -> None:
    judge = RoutingJudge({0: GOOD, 2: MASKED})
    await run(judge)
    text = next(r for r in judge.requests if judged_turn(r) == 2).instructions
    assert '1. cancel_order({"order_id": "8841-22"}) -> ERROR: {"error": "already shipped"}' in text
    assert "message [11]" in text and "Done! Your order has been cancelled." in text
    assert "Rule-based findings: 1 of 1 call(s) failed" in text
    assert "the reply may claim success despite the error" in text
    for kind in ("parameter_error", "invalid_function", "sequence_error", "result_ignored", "repeated_failure"):
        assert f"- {kind}:" in text
    assert "get_order" not in text  # only this turn's calls
    assert strict_schema_problems(judge.requests[0].schema) == []


@pytest.mark.parametrize(
    ("severity", "score", "passed"), [("low", 0.7, True), ("medium", 0.3, False), ("high", 0.0, False)]
)
async def test_unhandled_scores_by_severity(severity: str, score: float, passed: bool) -> None:
    judge = RoutingJudge({0: GOOD, 2: verdict(False, severity, "error_handling")})
    turns, whole = split(await run(judge))
    assert (turns[2].score, turns[2].label, turns[2].passed) == (score, severity, passed)
    assert whole.score == round((1.0 + score) / 2, 4)


async def test_handled_scores_one_whatever_the_severity() -> None:
    judge = RoutingJudge({0: verdict(True, "low", "parameter_error"), 2: GOOD})
    turns, whole = split(await run(judge))
    assert (turns[0].score, turns[0].label, whole.score, whole.label) == (1.0, "handled", 1.0, "handled")


@pytest.mark.parametrize(
    "bad",
    [
        verdict(False, "none"),  # unhandled but harmless: contradictory
        verdict(False, "critical"),  # unknown severity
        verdict(False, "high", "timeout"),  # unknown error type
        {"handled": "no", "error_types": [], "severity": "high", "reason": "x"},  # not a boolean
        {"handled": True, "error_types": [], "severity": "none"},  # no reason
    ],
)
async def test_malformed_twice_is_an_error_on_that_turn(bad: dict[str, Any]) -> None:
    thread = thread_from_messages("t", first_turn())
    judge = ScriptedJudge({NAME: [bad, bad]})
    turns, whole = split(await run(judge, thread))
    assert len(judge.requests) == 2
    assert (turns[0].status, turns[0].score) == (Status.ERROR, None)
    assert turns[0].reason.startswith("judge failed:")
    assert whole.status == Status.ERROR


async def test_unknown_severity_reason_names_the_labels() -> None:
    thread = thread_from_messages("t", first_turn())
    judge = ScriptedJudge({NAME: [verdict(False, "critical"), verdict(False, "critical")]})
    turns, _ = split(await run(judge, thread))
    assert "'severity' must be one of none, low, medium, high" in turns[0].reason


async def test_one_failing_turn_keeps_the_other() -> None:
    judge = RoutingJudge({0: JudgeError("timeout"), 2: MASKED})
    turns, whole = split(await run(judge))
    assert (turns[0].status, turns[2].status) == (Status.ERROR, Status.OK)
    assert (whole.status, whole.score, whole.evidence["unjudged_turns"]) == (Status.OK, 0.0, [0])
    assert "1 turn(s) could not be judged" in whole.reason


async def test_no_tool_calls_is_not_applicable() -> None:
    thread = thread_from_messages("t", [user("hi"), say("hello")])
    judge = RoutingJudge({})
    [res] = await run(judge, thread)
    assert (res.status, res.scope) == (Status.NOT_APPLICABLE, Scope.THREAD)
    assert judge.requests == []


async def test_tools_without_errors_are_skipped() -> None:
    thread = thread_from_messages(
        "t",
        [
            user("status of 8841-22?"),
            call("c1", "get_order", {"order_id": "8841-22"}),
            result("c1", '{"status": "shipped"}'),
            say("Shipped."),
        ],
    )
    judge = RoutingJudge({})
    [res] = await run(judge, thread)
    assert res.status == Status.SKIPPED
    assert res.reason == "no tool errors found by the deterministic tier"
    assert judge.requests == []


async def test_gates_on_the_deterministic_results_it_is_given() -> None:
    only_turn_2 = [r for r in ToolErrors().evaluate(THREAD) if r.turn_index != 0]
    judge = RoutingJudge({2: MASKED})
    turns, _ = split(await run(judge, deterministic=only_turn_2))
    assert list(turns) == [2]


async def test_computes_the_gate_when_the_deterministic_tier_did_not_run() -> None:
    judge = RoutingJudge({0: GOOD, 2: MASKED})
    turns, _ = split(await run(judge, deterministic=[]))
    assert list(turns) == [0, 2]


async def test_unchanged_turns_are_reused_without_a_call() -> None:
    before = await run(RoutingJudge({0: GOOD, 2: MASKED}))
    reuse = {(NAME, THREAD.turns[r.turn_index].content_hash): r for r in before if r.turn_index is not None}
    judge = RoutingJudge({0: GOOD, 2: GOOD})
    turns, whole = split(await run(judge, reuse=reuse))
    assert judge.requests == []
    assert (turns[2].score, turns[2].evidence["reused"], turns[2].input_tokens) == (0.0, True, 0)
    assert (whole.score, whole.evidence["reused_turns"], whole.input_tokens) == (0.5, [0, 2], 0)
    other_model = RoutingJudge({0: GOOD, 2: GOOD}, model="other-judge")
    await run(other_model, reuse=reuse)
    assert len(other_model.requests) == 2
