"""L5 `turn_relevancy`: one concurrent call per reply over a sliding window, reuse of unchanged windows."""

import asyncio
import re
from collections.abc import Callable
from typing import Any, TypeVar

from tests.judged.fakes import ScriptedJudge, chat, judge_context, strict_schema_problems
from tracing_eval.metrics.judged.base import JudgeError, JudgeRequest, JudgeUsage, MalformedAnswer
from tracing_eval.metrics.judged.turn_relevancy import NAME, TurnRelevancy
from tracing_eval.model import MetricResult, Scope, Status, Thread

T = TypeVar("T")

TEXTS = (
    "I want to return a damaged order.",
    "Sorry! What is the order number?",
    "It's #4471.",
    "Thanks. Was it damaged on arrival?",
    "Yes, the screen was cracked.",
    "Our cafeteria serves soup on Fridays.",
    "Refund please.",
    "Your refund of order #4471 is on its way.",
)  # replies at [1], [3], [5], [7] in turns 0..3


def yes(reason: str = "on topic") -> dict[str, str]:
    return {"verdict": "yes", "reason": reason}


def no(reason: str = "off topic") -> dict[str, str]:
    return {"verdict": "no", "reason": reason}


def judged_message(request: JudgeRequest) -> int:
    match = re.search(r"message \[(\d+)\]", request.instructions)
    assert match, request.instructions
    return int(match.group(1))


class RoutingJudge:
    """Answers by the judged message number, after a delay, counting the calls in flight."""

    def __init__(self, answers: dict[int, Any], model: str = "fake-judge", delay: float = 0.01) -> None:
        self.model = model
        self.answers = answers
        self.delay = delay
        self.requests: list[JudgeRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def ask(self, request: JudgeRequest, parse: Callable[[Any], T]) -> tuple[T, JudgeUsage]:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        answer = self.answers[judged_message(request)]
        if isinstance(answer, BaseException):
            raise answer
        try:
            return parse(answer), JudgeUsage(calls=1, input_tokens=100, output_tokens=20, cost_usd=0.001)
        except MalformedAnswer as exc:
            raise JudgeError(str(exc)) from exc


def split(results: list[MetricResult]) -> tuple[dict[int, MetricResult], MetricResult]:
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN and r.turn_index is not None}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


async def run(
    thread: Thread,
    judge: Any,
    options: dict[str, Any] | None = None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
) -> list[MetricResult]:
    ctx = judge_context(thread, judge, options=options)
    ctx.reuse = reuse or {}
    return await TurnRelevancy().evaluate(thread, ctx)


def reuse_of(thread: Thread, results: list[MetricResult]) -> dict[tuple[str, str], MetricResult]:
    """What the pipeline hands back for the next version: earlier results by (metric, input_hash)."""
    return {(r.metric, r.input_hash): r for r in results if r.input_hash}


async def test_prompts_name_the_reply_and_the_window_bounds() -> None:
    thread = chat(*TEXTS)
    judge = RoutingJudge({1: yes(), 3: yes(), 5: no(), 7: yes()})
    await run(thread, judge, options={"window": 2})
    prompts = sorted(r.instructions for r in judge.requests)
    assert len(prompts) == 4
    assert "message [1], the last assistant reply of turn 0" in prompts[0]
    assert "window of turns 0 to 0" in prompts[0]
    assert "window of turns 0 to 1" in prompts[1]
    assert "window of turns 1 to 2" in prompts[2] and "ignore everything after turn 2" in prompts[2]
    assert "window of turns 2 to 3" in prompts[3] and "the last 2 turns at most" in prompts[3]
    assert all(r.transcript == judge.requests[0].transcript for r in judge.requests)  # one shared prefix
    assert strict_schema_problems(judge.requests[0].schema) == []


async def test_default_window_is_five_turns() -> None:
    texts = tuple(f"{role} {k}" for k in range(7) for role in ("question", "answer"))
    thread = chat(*texts)
    judge = RoutingJudge({2 * k + 1: yes() for k in range(7)})
    await run(thread, judge)
    last = next(r for r in judge.requests if "message [13]" in r.instructions)
    assert "window of turns 2 to 6 (the last 5 turns at most)" in last.instructions


async def test_per_turn_and_thread_results_from_concurrent_calls() -> None:
    thread = chat(*TEXTS)
    judge = RoutingJudge({1: yes(), 3: yes(), 5: no("cafeteria talk"), 7: yes()})
    turns, whole = split(await run(thread, judge))
    assert judge.max_in_flight == 4  # every turn's call was in flight at once
    assert [turns[i].score for i in range(4)] == [1.0, 1.0, 0.0, 1.0]
    assert (turns[2].label, turns[2].reason, turns[2].passed) == ("irrelevant", "cafeteria talk", False)
    assert turns[2].evidence["message"] == 5 and turns[2].evidence["window"] == [0, 2]
    assert (whole.score, whole.label, whole.passed) == (0.75, "irrelevant", True)
    assert whole.evidence["irrelevant_turns"] == [2]
    assert whole.evidence["judged_turns"] == 4
    # usage: each turn its own call, the thread result the sum
    assert [turns[i].input_tokens for i in range(4)] == [100] * 4
    assert (whole.input_tokens, whole.output_tokens, whole.cost_usd, whole.judge_model) == (
        400,
        80,
        0.004,
        "fake-judge",
    )


async def test_one_failing_turn_keeps_the_others() -> None:
    thread = chat(*TEXTS)
    judge = RoutingJudge({1: yes(), 3: JudgeError("timeout"), 5: yes(), 7: no()})
    turns, whole = split(await run(thread, judge))
    assert len(judge.requests) == 4
    assert (turns[1].status, turns[1].score, turns[1].scope) == (Status.ERROR, None, Scope.TURN)
    assert "timeout" in turns[1].reason
    assert [turns[i].status for i in (0, 2, 3)] == [Status.OK] * 3
    assert (whole.score, whole.evidence["unjudged_turns"], whole.evidence["judged_turns"]) == (0.6667, [1], 3)
    assert "1 turn(s) could not be judged" in whole.reason
    assert whole.input_tokens == 300


async def test_all_turns_failing_is_a_thread_error() -> None:
    thread = chat(*TEXTS[:4])
    judge = RoutingJudge({1: JudgeError("down"), 3: JudgeError("down")})
    turns, whole = split(await run(thread, judge))
    assert [r.status for r in turns.values()] == [Status.ERROR, Status.ERROR]
    assert (whole.status, whole.score) == (Status.ERROR, None)


async def test_unknown_label_is_an_error_with_reason() -> None:
    thread = chat(*TEXTS[:2])
    judge = ScriptedJudge({NAME: [{"verdict": "partly", "reason": "x"}, {"verdict": "sort of", "reason": "x"}]})
    turns, whole = split(await run(thread, judge))
    assert len(judge.requests) == 2  # asked, then re-asked once
    assert turns[0].status == Status.ERROR
    assert "'verdict' must be one of yes, no" in turns[0].reason
    assert whole.status == Status.ERROR
    assert whole.input_tokens == 0  # the failed call's usage is not known to the metric


async def test_reask_after_malformed_answer_then_ok() -> None:
    thread = chat(*TEXTS[:2])
    judge = ScriptedJudge({NAME: [{"verdict": "maybe", "reason": "x"}, yes()]})
    turns, whole = split(await run(thread, judge))
    assert (turns[0].score, turns[0].input_tokens, whole.input_tokens) == (1.0, 200, 200)


async def test_unchanged_windows_are_reused_without_a_call() -> None:
    first = chat(*TEXTS[:6])
    judge = ScriptedJudge({NAME: [yes(), yes(), no()]})
    before = await run(first, judge, options={"window": 2})
    grown = chat(*TEXTS)
    judge = RoutingJudge({7: yes()})
    turns, whole = split(await run(grown, judge, options={"window": 2}, reuse=reuse_of(first, before)))
    assert [r.instructions for r in judge.requests] == [judge.requests[0].instructions]
    assert "message [7]" in judge.requests[0].instructions
    assert [turns[i].score for i in range(4)] == [1.0, 1.0, 0.0, 1.0]
    assert [turns[i].evidence.get("reused", False) for i in range(4)] == [True, True, True, False]
    assert turns[0].input_tokens == 0 and turns[0].judge_model == "fake-judge"
    assert (whole.score, whole.evidence["reused_turns"], whole.input_tokens) == (0.75, [0, 1, 2], 100)


async def test_a_changed_window_is_judged_again() -> None:
    first = chat(*TEXTS)
    before = await run(first, RoutingJudge({1: yes(), 3: yes(), 5: yes(), 7: yes()}), options={"window": 2})
    edited = chat(*TEXTS[:3], "Thanks. Was it damaged before or after delivery?", *TEXTS[4:])
    judge = RoutingJudge({3: yes(), 5: no(), 7: yes()})
    turns, _ = split(await run(edited, judge, options={"window": 2}, reuse=reuse_of(first, before)))
    # turn 1 changed: its own window and turn 2's window include it; turns 0 and 3 are untouched
    assert sorted(judged_message(r) for r in judge.requests) == [3, 5]
    assert [turns[i].evidence.get("reused", False) for i in range(4)] == [True, False, False, True]


async def test_another_window_size_or_judge_model_is_not_reused() -> None:
    thread = chat(*TEXTS[:4])
    before = await run(thread, RoutingJudge({1: yes(), 3: yes()}), options={"window": 2})
    judge = RoutingJudge({1: no(), 3: no()})
    turns, _ = split(await run(thread, judge, options={"window": 3}, reuse=reuse_of(thread, before)))
    assert len(judge.requests) == 2 and turns[0].score == 0.0
    judge = RoutingJudge({1: no(), 3: no()}, model="other-judge")
    await run(thread, judge, options={"window": 2}, reuse=reuse_of(thread, before))
    assert len(judge.requests) == 2


async def test_errors_are_not_reused() -> None:
    thread = chat(*TEXTS[:2])
    before = await run(thread, RoutingJudge({1: JudgeError("down")}))
    judge = RoutingJudge({1: yes()})
    turns, _ = split(await run(thread, judge, reuse=reuse_of(thread, before)))
    assert len(judge.requests) == 1 and turns[0].score == 1.0


async def test_turns_without_a_reply_are_not_judged() -> None:
    thread = chat(*TEXTS[:2], "Anyone there?")
    judge = RoutingJudge({1: yes()})
    turns, whole = split(await run(thread, judge))
    assert list(turns) == [0] and whole.score == 1.0


async def test_no_reply_is_not_applicable() -> None:
    thread = chat("hello?")
    judge = RoutingJudge({})
    [result] = await run(thread, judge)
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []


async def test_bad_window_option_is_an_error() -> None:
    thread = chat(*TEXTS[:2])
    judge = RoutingJudge({})
    [result] = await run(thread, judge, options={"window": 0})
    assert result.status == Status.ERROR and "window" in result.reason
    assert judge.requests == []
