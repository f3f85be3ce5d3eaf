"""The judged tier over a thread: thread questions batched in one request, per-turn requests that hold
only the past, and no request over the judge's context. Everything through the real client."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import DATASETS
from tests.support.fakes.openai_server import FakeOpenAIServer, Json, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tests.support.scripted_judge import ScriptedJudge
from tracing_eval.config import DETERMINISTIC_PACK, JUDGED_PACK, JudgeSettings, Settings
from tracing_eval.evaluate import evaluate_all
from tracing_eval.judge import ANSWER_RESERVE_TOKENS, JudgeClient, build_messages, request_tokens, response_format
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.metrics.judged.base import JudgeRequest
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_json_line, thread_from_messages

THREAD_METRICS = ["failure_rate", "conversational_flow", "completeness", "role_adherence"]


def tau(line_no: int) -> Thread:
    lines = (DATASETS / "tau_airline_gpt4o.jsonl").read_bytes().splitlines()
    return thread_from_json_line(lines[line_no - 1], line_no)


def support_chat() -> Thread:
    return thread_from_messages(
        "t",
        [
            {"role": "system", "content": "You are the support assistant of a phone shop."},
            {"role": "user", "content": "My phone arrived with a cracked screen. Order 4471."},
            {"role": "assistant", "content": "Sorry! Would you like a replacement or a refund?"},
            {"role": "user", "content": "A refund."},
            {"role": "assistant", "content": "Your refund for order 4471 is on its way, 3-5 business days."},
        ],
    )


ANSWERS: dict[str, Any] = {
    "failure_rate": {"evidence": [], "reason": "nothing uncertain", "verdict": "not_applicable"},
    "conversational_flow": {"key_issues": [], "reason": "smooth", "verdict": "fully"},
    "completeness": {
        "intentions": [{"intention": "refund", "messages": [1, 4], "reason": "done", "status": "fulfilled"}],
        "reason": "all done",
    },
    "role_adherence": {"out_of_character": [], "reason": "in role"},
}


async def tier(thread: Thread, judge: Any, names: list[str]) -> dict[str, list[MetricResult]]:
    metrics = build_metrics(Settings(), names)
    results = await evaluate_all(thread, metrics, judge)
    out: dict[str, list[MetricResult]] = {}
    for r in results:
        out.setdefault(r.metric, []).append(r)
    return out


async def test_thread_metrics_are_one_batched_request() -> None:
    judge = ScriptedJudge({name: [ANSWERS[name]] for name in THREAD_METRICS}, batch_thread_metrics=True)
    results = await tier(support_chat(), judge, THREAD_METRICS)
    [request] = judge.requests
    assert request.metric == "thread_metrics"
    assert list(request.schema["properties"]) == THREAD_METRICS and request.schema["required"] == THREAD_METRICS
    for name in THREAD_METRICS:
        assert f'## Question "{name}"' in request.instructions
        [result] = results[name]
        assert result.status == Status.OK, (name, result.reason)
        assert sorted(result.evidence["batched_with"]) == sorted(n for n in THREAD_METRICS if n != name)
    assert (results["completeness"][0].score, results["conversational_flow"][0].label) == (1.0, "fully")
    billed = judge.billed()
    assert sum(results[n][0].input_tokens for n in THREAD_METRICS) == billed[0]
    assert sum(results[n][0].output_tokens for n in THREAD_METRICS) == billed[1]
    assert judge.unused() == {}


async def test_a_broken_part_is_reasked_once_and_the_others_keep_their_answers() -> None:
    script: dict[str, list[Any]] = {name: [ANSWERS[name], ANSWERS[name]] for name in THREAD_METRICS}
    script["conversational_flow"] = [
        {"key_issues": [], "reason": "x", "verdict": "superb"},
        {"key_issues": [], "reason": "x", "verdict": "great"},
    ]
    judge = ScriptedJudge(script, batch_thread_metrics=True)
    results = await tier(support_chat(), judge, THREAD_METRICS)
    assert [r.reask for r in judge.requests] == [False, True]
    assert "question 'conversational_flow'" in judge.requests[1].body["messages"][-1]["content"]
    [flow] = results["conversational_flow"]
    assert (flow.status, flow.score) == (Status.ERROR, None)
    assert "malformed answer after one corrective re-ask" in flow.reason and "great" in flow.reason
    for name in ("failure_rate", "completeness", "role_adherence"):
        assert results[name][0].status == Status.OK


async def test_without_batching_every_thread_metric_asks_alone() -> None:
    judge = ScriptedJudge({name: [ANSWERS[name]] for name in THREAD_METRICS})
    results = await tier(support_chat(), judge, THREAD_METRICS)
    assert sorted(r.metric for r in judge.requests) == sorted(THREAD_METRICS)
    assert len({r.transcript for r in judge.requests}) == 1  # one shared prefix
    assert all("batched_with" not in results[n][0].evidence for n in THREAD_METRICS)


async def test_a_single_question_is_not_batched_and_task_success_steps_follow_the_batch() -> None:
    goal = {"goal": "Get a refund for a damaged phone."}
    criteria = {"criteria": ["The assistant started the refund."]}
    verdicts = {"criterion_1": {"reason": "refund sent", "verdict": "fully"}}
    judge = ScriptedJudge({"task_success": [goal, criteria, verdicts]}, batch_thread_metrics=True)
    results = await tier(support_chat(), judge, ["task_success"])
    assert [r.metric for r in judge.requests] == ["task_success"] * 3
    assert results["task_success"][0].score == 1.0
    judge = ScriptedJudge(
        {"task_success": [goal, criteria, verdicts], "failure_rate": [ANSWERS["failure_rate"]]},
        batch_thread_metrics=True,
    )
    results = await tier(support_chat(), judge, ["task_success", "failure_rate"])
    first, second, third = judge.requests
    assert first.metric == "thread_metrics" and list(first.schema["properties"]) == ["task_success", "failure_rate"]
    assert second.transcript is None and third.transcript == first.transcript
    assert results["task_success"][0].score == 1.0 and results["failure_rate"][0].status == Status.OK


@pytest.fixture
async def schema_judge() -> AsyncIterator[tuple[FakeOpenAIServer, JudgeClient]]:
    with FakeOpenAIServer(SchemaJudge()) as server:
        settings = JudgeSettings(model="judge", base_url=server.base_url, api_key="test", cache=False, max_retries=0)
        async with JudgeClient(settings) as client:
            yield server, client


def later_texts(thread: Thread, turn: int) -> list[str]:
    return [json.dumps(m.content)[1:-1] for t in thread.turns[turn + 1 :] for m in t.messages if len(m.content) > 20]


async def test_no_per_turn_request_holds_text_from_a_later_turn(
    schema_judge: tuple[FakeOpenAIServer, JudgeClient],
) -> None:
    server, client = schema_judge
    thread = tau(8)
    results = await evaluate_all(thread, build_metrics(Settings(), [*DETERMINISTIC_PACK, *JUDGED_PACK]), client)
    per_turn = [
        e.body
        for e in server.requests
        if e.body
        and e.body["response_format"]["json_schema"]["name"]
        in (
            "turn_relevancy",
            "tool_error_handling",
        )
    ]
    judged = [r for r in results if r.scope == Scope.TURN and r.metric in ("turn_relevancy", "tool_error_handling")]
    assert len(per_turn) == len(judged) > 5
    for body in per_turn:
        transcript = body["messages"][1]["content"]
        last = max(int(t) for t in re.findall(r"^--- turn (\d+)$", transcript, re.M))
        assert all(text not in transcript for text in later_texts(thread, last)), last
    assert all(r.status != Status.ERROR for r in results)


async def test_no_request_exceeds_the_configured_context() -> None:
    msgs: list[Json] = [{"role": "system", "content": "You are the support assistant. " * 40}]
    for k in range(150):
        msgs += [
            {"role": "user", "content": f"Question {k}: where is order {1000 + k}? " + "Please hurry. " * 30},
            {"role": "assistant", "content": f"Order {1000 + k} ships on day {k % 28 + 1}. " + "Thank you. " * 30},
        ]
    thread = thread_from_messages("long", msgs)
    with FakeOpenAIServer(SchemaJudge()) as server:
        settings = JudgeSettings(
            model="judge", base_url=server.base_url, api_key="test", cache=False, max_retries=0, context_tokens=24_000
        )
        async with JudgeClient(settings) as client:
            results = await evaluate_all(thread, build_metrics(Settings(), JUDGED_PACK), client)
    bodies = [e.body for e in server.requests if e.body]
    assert bodies and all(
        request_tokens(b["messages"], b["response_format"]) <= 24_000 - ANSWER_RESERVE_TOKENS for b in bodies
    )
    failure = next(r for r in results if r.metric == "failure_rate")
    assert failure.status == Status.OK and failure.evidence["transcript"]["elided_turns"]
    assert "--- turns " in bodies[0]["messages"][1]["content"] or any(
        "left out to fit the judge's token budget" in b["messages"][1]["content"] for b in bodies
    )


async def test_a_request_over_the_context_is_refused_without_a_call() -> None:
    with FakeOpenAIServer(lambda _body: Reply("{}")) as server:
        settings = JudgeSettings(model="judge", base_url=server.base_url, api_key="test", context_tokens=8_000)
        async with JudgeClient(settings) as client:
            request = JudgeRequest("m", "word " * 6_000, "Rate it.", {"type": "object"})
            tokens = request_tokens(build_messages(request, "json_schema"), response_format(request, "json_schema"))
            with pytest.raises(Exception, match=r"judge.context_tokens = 8,000") as caught:
                await client.ask(request, lambda data: data)
    assert f"about {tokens:,} tokens" in str(caught.value) and server.requests == []
