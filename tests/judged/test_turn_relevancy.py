"""L5 `turn_relevancy`: one concurrent call per reply over its window of the past, reuse of unchanged windows."""

import json
import re
from collections.abc import Callable
from typing import Any

from tests.support.fakes.openai_server import Json, Reply
from tests.support.scripted_judge import ScriptedJudge, Sent, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.judged.transcript import SYSTEM_NOT_SHOWN
from tracing_eval.metrics.judged.turn_relevancy import TurnRelevancy
from tracing_eval.model import MetricResult, Scope, Status, Thread

NAME = TurnRelevancy.name

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
    return {"reason": reason, "verdict": "yes"}


def no(reason: str = "off topic") -> dict[str, str]:
    return {"reason": reason, "verdict": "no"}


def judged_message(instructions: str) -> int:
    match = re.search(r"last message shown, \[(\d+)\]", instructions)
    assert match, instructions
    return int(match.group(1))


def routing(answers: dict[int, Any], delay: float = 0.0) -> Callable[[Json], Any]:
    """Answers by the judged message number (a failure for an exception), after `delay` seconds."""

    def route(body: Json) -> Any:
        answer = answers[judged_message(body["messages"][2]["content"])]
        if isinstance(answer, BaseException):
            return Reply.failure(500, str(answer), delay=delay)
        return Reply(json.dumps(answer), delay=delay)

    return route


def routing_judge(answers: dict[int, Any], model: str = "fake-judge", delay: float = 0.0) -> ScriptedJudge:
    return ScriptedJudge({NAME: routing(answers, delay)}, model=model)


def judged(requests: list[Sent]) -> list[int]:
    return sorted(judged_message(r.instructions) for r in requests)


def split(results: list[MetricResult]) -> tuple[dict[int, MetricResult], MetricResult]:
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN and r.turn_index is not None}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


async def run(
    thread: Thread,
    judge: ScriptedJudge,
    options: dict[str, Any] | None = None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
) -> list[MetricResult]:
    return await TurnRelevancy().evaluate(thread, judge_context(thread, judge, options=options, reuse=reuse))


def reuse_of(thread: Thread, results: list[MetricResult]) -> dict[tuple[str, str], MetricResult]:
    """What the pipeline hands back for the next version: earlier results by (metric, input_hash)."""
    return {(r.metric, r.input_hash): r for r in results if r.input_hash}


async def test_each_request_holds_its_window_of_the_past_and_nothing_later() -> None:
    thread = chat(*TEXTS, system="You are the returns assistant of a phone shop.")
    judge = routing_judge({2: yes(), 4: yes(), 6: no(), 8: yes()})
    await run(thread, judge, options={"window": 2})
    by_reply = {judged_message(r.instructions): r for r in judge.requests}
    assert sorted(by_reply) == [2, 4, 6, 8]
    for k, n in enumerate([2, 4, 6, 8]):  # turn k, reply [n]
        request = by_reply[n]
        assert request.transcript is not None
        assert request.transcript.startswith(SYSTEM_NOT_SHOWN + "\nCONVERSATION:\n")
        assert "returns assistant" not in request.transcript  # the system prompt is not sent by default
        assert request.transcript.rstrip().endswith(json.dumps(TEXTS[2 * k + 1]))  # the judged reply is last
        for later in TEXTS[2 * k + 2 :]:
            assert json.dumps(later) not in request.transcript  # no text from a later turn
        first = max(0, k - 1)
        assert f"--- turn {first}\n" in request.transcript and f"--- turn {k}\n" in request.transcript
        if first > 0:
            gap = "--- turn 0 (messages [1] to [2])" if first == 1 else f"--- turns 0 to {first - 1} (messages [1] to"
            assert gap in request.transcript and "not shown: before this window" in request.transcript
            assert json.dumps(TEXTS[0]) not in request.transcript
        assert f"the assistant's reply in turn {k}" in request.instructions
        assert "the last 2 turns at most" in request.instructions
    assert strict_schema_problems(judge.requests[0].schema) == [] and verdict_last(judge.requests[0].schema)


async def test_default_window_is_five_turns() -> None:
    texts = tuple(f"{role} {k}" for k in range(7) for role in ("question", "answer"))
    thread = chat(*texts)
    judge = routing_judge({2 * k + 1: yes() for k in range(7)})
    await run(thread, judge)
    last = next(r for r in judge.requests if judged_message(r.instructions) == 13)
    assert last.transcript is not None and "--- turns 0 to 1 (messages [0] to [3]) not shown" in last.transcript
    assert "--- turn 2\n" in last.transcript and "the last 5 turns at most" in last.instructions


async def test_per_turn_and_thread_results_from_concurrent_calls() -> None:
    thread = chat(*TEXTS)
    judge = routing_judge({1: yes(), 3: yes(), 5: no("cafeteria talk"), 7: yes()}, delay=0.2)
    turns, whole = split(await run(thread, judge))
    assert judge.server.max_in_flight == 4  # every turn's call was in flight at once
    assert [turns[i].score for i in range(4)] == [1.0, 1.0, 0.0, 1.0]
    assert (turns[2].label, turns[2].reason, turns[2].passed) == ("irrelevant", "cafeteria talk", False)
    assert turns[2].evidence["message"] == 5 and turns[2].evidence["window"] == [0, 2]
    assert (whole.score, whole.label, whole.passed) == (0.75, "irrelevant", True)
    assert whole.evidence["irrelevant_turns"] == [2]
    assert whole.evidence["judged_turns"] == 4
    # usage: each turn its own call, the thread result the sum
    billed = {judged_message(r.instructions): r.usage["prompt_tokens"] for r in judge.requests if r.usage}
    assert [turns[i].input_tokens for i in range(4)] == [billed[n] for n in (1, 3, 5, 7)]
    assert ((whole.input_tokens, whole.output_tokens), whole.judge_model) == (judge.billed(), "fake-judge")


async def test_one_failing_turn_keeps_the_others() -> None:
    thread = chat(*TEXTS)
    judge = routing_judge({1: yes(), 3: RuntimeError("timeout"), 5: yes(), 7: no()})
    turns, whole = split(await run(thread, judge))
    assert len(judge.requests) == 4
    assert (turns[1].status, turns[1].score, turns[1].scope) == (Status.ERROR, None, Scope.TURN)
    assert "timeout" in turns[1].reason
    assert [turns[i].status for i in (0, 2, 3)] == [Status.OK] * 3
    assert (whole.score, whole.evidence["unjudged_turns"], whole.evidence["judged_turns"]) == (0.6667, [1], 3)
    assert "1 turn(s) could not be judged" in whole.reason
    assert whole.input_tokens == judge.billed()[0]


async def test_all_turns_failing_is_a_thread_error() -> None:
    thread = chat(*TEXTS[:4])
    judge = routing_judge({1: RuntimeError("down"), 3: RuntimeError("down")})
    turns, whole = split(await run(thread, judge))
    assert [r.status for r in turns.values()] == [Status.ERROR, Status.ERROR]
    assert (whole.status, whole.score) == (Status.ERROR, None)


async def test_unknown_label_is_an_error_with_reason_and_its_usage() -> None:
    thread = chat(*TEXTS[:2])
    judge = ScriptedJudge({NAME: [{"reason": "x", "verdict": "partly"}, {"reason": "x", "verdict": "sort of"}]})
    turns, whole = split(await run(thread, judge))
    assert len(judge.requests) == 2  # asked, then re-asked once
    assert turns[0].status == Status.ERROR
    assert "'verdict' must be one of yes, no" in turns[0].reason
    assert whole.status == Status.ERROR
    assert whole.input_tokens == judge.billed()[0]  # the two calls were paid for


async def test_reask_after_malformed_answer_then_ok() -> None:
    thread = chat(*TEXTS[:2])
    judge = ScriptedJudge({NAME: [{"reason": "x", "verdict": "maybe"}, yes()]})
    turns, whole = split(await run(thread, judge))
    assert (turns[0].score, turns[0].input_tokens, whole.input_tokens) == (1.0, judge.billed()[0], judge.billed()[0])


async def test_unchanged_windows_are_reused_without_a_call() -> None:
    first = chat(*TEXTS[:6])
    before = await run(first, routing_judge({1: yes(), 3: yes(), 5: no()}), options={"window": 2})
    assert all(r.input_hash for r in before if r.scope == Scope.TURN)
    grown = chat(*TEXTS)
    judge = routing_judge({7: yes()})
    turns, whole = split(await run(grown, judge, options={"window": 2}, reuse=reuse_of(first, before)))
    assert judged(judge.requests) == [7]
    assert [turns[i].score for i in range(4)] == [1.0, 1.0, 0.0, 1.0]
    assert [turns[i].evidence.get("reused", False) for i in range(4)] == [True, True, True, False]
    assert turns[0].input_tokens == 0 and turns[0].judge_model == "fake-judge"
    assert (whole.score, whole.evidence["reused_turns"], whole.input_tokens) == (0.75, [0, 1, 2], judge.billed()[0])


async def test_the_reuse_key_is_the_hash_of_what_was_sent() -> None:
    options = {"window": 2, "system_prompt": True}
    thread = chat(*TEXTS[:4], system="Only talk about returns.")
    before = await run(thread, routing_judge({2: yes(), 4: yes()}), options=options)
    keys = {r.turn_index: r.input_hash for r in before if r.scope == Scope.TURN}
    # shown, a new system prompt changes every request, so nothing is reused
    prompted = chat(*TEXTS[:4], system="Only talk about returns and exchanges.")
    judge = routing_judge({2: yes(), 4: yes()})
    again = await run(prompted, judge, options=options, reuse=reuse_of(thread, before))
    assert len(judge.requests) == 2
    assert {r.turn_index: r.input_hash for r in again if r.scope == Scope.TURN}.keys() == keys.keys()
    assert all(r.input_hash not in keys.values() for r in again if r.scope == Scope.TURN)
    # not shown (the default), it is not in what was sent: an edit to it alone reuses every verdict
    before = await run(thread, routing_judge({2: yes(), 4: no()}), options={"window": 2})
    judge = routing_judge({})
    turns, _ = split(await run(prompted, judge, options={"window": 2}, reuse=reuse_of(thread, before)))
    assert judge.requests == [] and [turns[0].score, turns[1].score] == [1.0, 0.0]


async def test_the_system_prompt_is_not_sent_by_default_and_the_results_say_so() -> None:
    prompt = "You are the returns assistant of a phone shop. Never discuss the cafeteria."
    thread = chat(*TEXTS[:6], system=prompt)
    judge = routing_judge({2: yes(), 4: yes(), 6: no()})
    turns, whole = split(await run(thread, judge))
    assert len(judge.requests) == 3
    for request in judge.requests:
        assert request.transcript is not None and prompt not in request.transcript
        assert request.transcript.splitlines()[0] == SYSTEM_NOT_SHOWN
    for result in turns.values():
        assert result.evidence["transcript"]["system_prompt_not_shown"] == {"of": len(prompt)}
    assert whole.evidence["system_prompt_shown"] is False


async def test_option_system_prompt_sends_it_in_every_window() -> None:
    prompt = "You are the returns assistant of a phone shop."
    thread = chat(*TEXTS[:6], system=prompt)
    judge = routing_judge({2: yes(), 4: yes(), 6: yes()})
    turns, whole = split(await run(thread, judge, options={"system_prompt": True, "window": 1}))
    for request in judge.requests:
        assert request.transcript is not None
        assert request.transcript.startswith(f"SYSTEM PROMPT OF THE ASSISTANT:\n{json.dumps(prompt)}\n")
    assert all("transcript" not in r.evidence for r in turns.values())
    assert whole.evidence["system_prompt_shown"] is True


async def test_without_a_system_prompt_no_line_stands_for_it() -> None:
    judge = routing_judge({1: yes(), 3: yes()})
    turns, _ = split(await run(chat(*TEXTS[:4]), judge))
    assert all(r.transcript is not None and r.transcript.startswith("CONVERSATION:\n") for r in judge.requests)
    assert all("transcript" not in r.evidence for r in turns.values())


async def test_a_changed_window_is_judged_again() -> None:
    first = chat(*TEXTS)
    before = await run(first, routing_judge({1: yes(), 3: yes(), 5: yes(), 7: yes()}), options={"window": 2})
    edited = chat(*TEXTS[:3], "Thanks. Was it damaged before or after delivery?", *TEXTS[4:])
    judge = routing_judge({3: yes(), 5: no(), 7: yes()})
    turns, _ = split(await run(edited, judge, options={"window": 2}, reuse=reuse_of(first, before)))
    # turn 1 changed: its own window and turn 2's window include it; turns 0 and 3 are untouched
    assert judged(judge.requests) == [3, 5]
    assert [turns[i].evidence.get("reused", False) for i in range(4)] == [True, False, False, True]


async def test_another_window_size_or_judge_model_is_not_reused() -> None:
    thread = chat(*TEXTS[:4])
    before = await run(thread, routing_judge({1: yes(), 3: yes()}), options={"window": 1})
    judge = routing_judge({1: no(), 3: no()})
    turns, _ = split(await run(thread, judge, options={"window": 3}, reuse=reuse_of(thread, before)))
    assert len(judge.requests) == 2 and turns[0].score == 0.0
    judge = routing_judge({1: no(), 3: no()}, model="other-judge")
    await run(thread, judge, options={"window": 1}, reuse=reuse_of(thread, before))
    assert len(judge.requests) == 2


async def test_errors_are_not_reused() -> None:
    thread = chat(*TEXTS[:2])
    before = await run(thread, routing_judge({1: RuntimeError("down")}))
    judge = routing_judge({1: yes()})
    turns, _ = split(await run(thread, judge, reuse=reuse_of(thread, before)))
    assert len(judge.requests) == 1 and turns[0].score == 1.0


async def test_turns_without_a_reply_are_not_judged() -> None:
    thread = chat(*TEXTS[:2], "Anyone there?")
    judge = routing_judge({1: yes()})
    turns, whole = split(await run(thread, judge))
    assert list(turns) == [0] and whole.score == 1.0


async def test_no_reply_is_not_applicable() -> None:
    thread = chat("hello?")
    judge = routing_judge({})
    [result] = await run(thread, judge)
    assert result.status == Status.NOT_APPLICABLE and judge.requests == []


async def test_bad_window_option_is_an_error() -> None:
    thread = chat(*TEXTS[:2])
    judge = routing_judge({})
    [result] = await run(thread, judge, options={"window": 0})
    assert result.status == Status.ERROR and "window" in result.reason
    assert judge.requests == []


async def test_bad_system_prompt_option_is_an_error() -> None:
    judge = routing_judge({})
    [result] = await run(chat(*TEXTS[:2]), judge, options={"system_prompt": "yes"})
    assert result.status == Status.ERROR and "system_prompt" in result.reason
    assert judge.requests == []
