"""L9 `tool_error_handling`: one call per turn where `tool_errors` found a failure, concurrent."""

import json
import re
from typing import Any

import pytest

from tests.support.fakes.openai_server import Json, Reply
from tests.support.scripted_judge import ScriptedJudge, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.deterministic.tool_errors import ToolErrors
from tracing_eval.metrics.judged.tool_error_handling import ToolErrorHandling
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_messages

NAME = ToolErrorHandling.name


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
    return {"error_types": list(types), "reason": reason, "handled": handled, "severity": severity}


def first_turn() -> list[dict[str, Any]]:
    return [
        user("Where is my order 8841?"),
        call("c1", "get_order", {"order_id": "8841"}),
        result("c1", "Error: order not found"),
        say("Sorry, I could not find order 8841."),
    ]


GOOD = verdict(True, "none", reason="explained and asked for the number")
MASKED = verdict(False, "high", "result_ignored", "error_handling", reason="claims a cancellation that failed")


def judged_turn(instructions: str) -> int:
    match = re.search(r"tool error handling in turn (\d+)", instructions)
    assert match, instructions
    return int(match.group(1))


def routing_judge(answers: dict[int, Any], model: str = "fake-judge", delay: float = 0.0) -> ScriptedJudge:
    """Answers by the turn named in the instructions (a failure for an exception), after `delay` seconds."""

    def route(body: Json) -> Any:
        answer = answers[judged_turn(body["messages"][2]["content"])]
        if isinstance(answer, BaseException):
            return Reply.failure(500, str(answer), delay=delay)
        return Reply(json.dumps(answer), delay=delay)

    return ScriptedJudge({NAME: route}, model=model)


async def run(
    judge: ScriptedJudge,
    thread: Thread = THREAD,
    *,
    deterministic: list[MetricResult] | None = None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
) -> list[MetricResult]:
    found = ToolErrors().evaluate(thread) if deterministic is None else deterministic
    return await ToolErrorHandling().evaluate(thread, judge_context(thread, judge, deterministic=found, reuse=reuse))


def split(results: list[MetricResult]) -> tuple[dict[int, MetricResult], MetricResult]:
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN and r.turn_index is not None}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


async def test_only_failing_turns_are_judged_concurrently() -> None:
    judge = routing_judge({0: GOOD, 2: MASKED}, delay=0.2)
    turns, whole = split(await run(judge))
    assert sorted(judged_turn(r.instructions) for r in judge.requests) == [0, 2]
    assert judge.server.max_in_flight == 2
    assert list(turns) == [0, 2]
    assert (turns[0].score, turns[0].label, turns[0].passed) == (1.0, "handled", True)
    assert (turns[2].score, turns[2].label, turns[2].passed) == (0.0, "high", False)
    assert turns[2].reason == "claims a cancellation that failed"
    assert turns[2].evidence["error_types"] == ["error_handling", "result_ignored"]
    assert turns[2].evidence["failed_calls"][0]["name"] == "cancel_order"
    assert (whole.score, whole.label, whole.passed) == (0.5, "high", False)
    assert whole.evidence["unhandled_turns"] == [2]
    assert ((whole.input_tokens, whole.output_tokens), whole.judge_model) == (judge.billed(), "fake-judge")
    assert turns[0].input_tokens + turns[2].input_tokens == whole.input_tokens


async def test_the_request_shows_that_turn_only_with_its_tool_history_reply_and_findings() -> None:
    judge = routing_judge({0: GOOD, 2: MASKED})
    await run(judge)
    request = next(r for r in judge.requests if judged_turn(r.instructions) == 2)
    text, transcript = request.instructions, request.transcript
    assert transcript is not None and transcript.startswith("CONVERSATION:\n--- turns 0 to 1 (messages [0] to [7])")
    assert '[9] assistant calls cancel_order({"order_id":"8841-22"}) -> ERROR in [10]' in transcript
    assert '[10] tool: {"error":"already shipped"}' in transcript
    assert '[11] assistant: "Done! Your order has been cancelled."' in transcript
    assert "Thanks." not in transcript and "get_order" not in transcript  # no other turn
    assert "turn 2, shown above" in text and "message [11]" in text
    assert "Rule-based findings: 1 of 1 call(s) failed" in text
    assert "the reply may claim success despite the error" in text
    for kind in ("parameter_error", "invalid_function", "sequence_error", "result_ignored", "repeated_failure"):
        assert f"- {kind}:" in text
    assert strict_schema_problems(request.schema) == [] and verdict_last(request.schema)


@pytest.mark.parametrize(
    ("severity", "score", "passed"), [("low", 0.7, True), ("medium", 0.3, False), ("high", 0.0, False)]
)
async def test_unhandled_scores_by_severity(severity: str, score: float, passed: bool) -> None:
    judge = routing_judge({0: GOOD, 2: verdict(False, severity, "error_handling")})
    turns, whole = split(await run(judge))
    assert (turns[2].score, turns[2].label, turns[2].passed) == (score, severity, passed)
    assert whole.score == round((1.0 + score) / 2, 4)


async def test_handled_scores_one_whatever_the_severity() -> None:
    judge = routing_judge({0: verdict(True, "low", "parameter_error"), 2: GOOD})
    turns, whole = split(await run(judge))
    assert (turns[0].score, turns[0].label, whole.score, whole.label) == (1.0, "handled", 1.0, "handled")


@pytest.mark.parametrize(
    "bad",
    [
        verdict(False, "none"),  # unhandled but harmless: contradictory
        verdict(False, "critical"),  # unknown severity
        verdict(False, "high", "timeout"),  # unknown error type
        {"error_types": [], "reason": "x", "handled": "no", "severity": "high"},  # not a boolean
        {"error_types": [], "handled": True, "severity": "none"},  # no reason
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
    judge = routing_judge({0: RuntimeError("timeout"), 2: MASKED})
    turns, whole = split(await run(judge))
    assert (turns[0].status, turns[2].status) == (Status.ERROR, Status.OK)
    assert (whole.status, whole.score, whole.evidence["unjudged_turns"]) == (Status.OK, 0.0, [0])
    assert "1 turn(s) could not be judged" in whole.reason


async def test_no_tool_calls_is_not_applicable() -> None:
    thread = thread_from_messages("t", [user("hi"), say("hello")])
    judge = routing_judge({})
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
    judge = routing_judge({})
    [res] = await run(judge, thread)
    assert res.status == Status.SKIPPED
    assert res.reason == "no tool errors found by the deterministic tier"
    assert judge.requests == []


async def test_gates_on_the_deterministic_results_it_is_given() -> None:
    only_turn_2 = [r for r in ToolErrors().evaluate(THREAD) if r.turn_index != 0]
    judge = routing_judge({2: MASKED})
    turns, _ = split(await run(judge, deterministic=only_turn_2))
    assert list(turns) == [2]


async def test_computes_the_gate_when_the_deterministic_tier_did_not_run() -> None:
    judge = routing_judge({0: GOOD, 2: MASKED})
    turns, _ = split(await run(judge, deterministic=[]))
    assert list(turns) == [0, 2]


async def test_unchanged_turns_are_reused_without_a_call() -> None:
    before = await run(routing_judge({0: GOOD, 2: MASKED}))
    reuse = {(NAME, r.input_hash): r for r in before if r.turn_index is not None and r.input_hash}
    assert len(reuse) == 2
    judge = routing_judge({0: GOOD, 2: GOOD})
    turns, whole = split(await run(judge, reuse=reuse))
    assert judge.requests == []
    assert (turns[2].score, turns[2].evidence["reused"], turns[2].input_tokens) == (0.0, True, 0)
    assert (whole.score, whole.evidence["reused_turns"], whole.input_tokens) == (0.5, [0, 2], 0)
    other_model = routing_judge({0: GOOD, 2: GOOD}, model="other-judge")
    await run(other_model, reuse=reuse)
    assert len(other_model.requests) == 2
