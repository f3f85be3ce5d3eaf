"""Unknown is not empty: an answer no convention could read is marked, never scored as an empty
reply, never routed to review; traces that yield no turn are counted once and logged once."""

from __future__ import annotations

import time

import orjson
import structlog

from tests.support.scripted_judge import ScriptedJudge
from tracing_eval.assemble import thread_from_traces, turn_from_trace
from tracing_eval.config import Settings
from tracing_eval.evaluate import evaluate_all, evaluate_thread
from tracing_eval.ingest import make_batch
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import Span, Status
from tracing_eval.pipeline import Pipeline
from tracing_eval.routing import route
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry


def js(value) -> str:
    return orjson.dumps(value).decode()


def user_part(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def turn_spans(trace: str, start: int, question: str, output: dict | None, conv: str = "conv-u") -> list[Span]:
    """An agent root and one chat span whose answer is in `output` (attribute name -> value)."""
    chat_attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": js([user_part(question)])}
    chat_attrs.update(output or {})
    return [
        Span(
            trace_id=trace,
            span_id=trace[:15] + "1",
            name="agent turn",
            start_ns=start,
            end_ns=start + 10,
            attributes={"gen_ai.conversation.id": conv},
        ),
        Span(
            trace_id=trace,
            span_id=trace[:15] + "2",
            parent_id=trace[:15] + "1",
            name="chat my-model",
            start_ns=start + 1,
            end_ns=start + 9,
            attributes=chat_attrs,
        ),
    ]


def answer(text: str, finish: str | None = "stop") -> dict:
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return {"gen_ai.output.messages": js([{**message, "finish_reason": finish} if finish else message])}


UNREADABLE = {"acme.llm.completion": js({"choice": {"said": "Your refund is on its way."}})}


def test_an_answer_in_an_unknown_attribute_is_unknown_with_where_it_was_looked_for():
    turn = turn_from_trace(turn_spans("1" * 32, 100, "Where is my refund?", UNREADABLE))
    assert turn.user_text == "Where is my refund?" and turn.assistant_messages == []
    unknown = turn.answer_unknown
    assert (unknown.reason, unknown.span_name, unknown.span_id) == ("unknown_answer", "chat my-model", "1" * 15 + "2")
    assert "acme.llm.completion" in unknown.attributes and "gen_ai.input.messages" in unknown.attributes
    assert "acme.llm.completion" in unknown.describe() and "chat my-model" in unknown.describe()


def test_an_empty_answer_is_empty_only_when_its_finish_reason_was_read():
    vouched = turn_from_trace(turn_spans("2" * 32, 100, "Hi?", answer("", finish="stop")))
    assert vouched.answer_unknown is None and [m.content for m in vouched.assistant_messages] == [""]
    unvouched = turn_from_trace(turn_spans("3" * 32, 100, "Hi?", answer("", finish=None)))
    assert unvouched.answer_unknown is not None and unvouched.assistant_messages == []
    said = turn_from_trace(turn_spans("4" * 32, 100, "Hi?", answer("Hello!", finish=None)))
    assert said.answer_unknown is None and said.assistant_text == "Hello!"


def test_a_failed_call_is_an_error_not_an_unknown_answer():
    spans = turn_spans("5" * 32, 100, "Hi?", None)
    spans[0].status, spans[0].status_message = "error", "RateLimitError: 429"
    turn = turn_from_trace(spans)
    assert turn.error == "RateLimitError: 429" and turn.answer_unknown is None


def mixed_thread():
    """Three turns; the middle one's answer cannot be read."""
    traces = [
        turn_spans("a" * 32, 100, "Where is my order A1?", answer("It shipped on May 2.")),
        turn_spans("b" * 32, 200, "And my refund?", UNREADABLE),
        turn_spans("c" * 32, 300, "Thanks!", answer("You're welcome!")),
    ]
    return thread_from_traces("otlp:conv-u", traces)


def test_metrics_that_need_the_answer_are_not_applicable_for_it_and_nothing_goes_to_review(settings: Settings):
    thread = mixed_thread()
    assert [t.answer_unknown is not None for t in thread.turns] == [False, True, False]
    results = evaluate_thread(thread, build_metrics(settings).deterministic)
    by = {(r.metric, r.turn_index): r for r in results}

    hygiene = by[("response_hygiene", 1)]
    assert hygiene.status is Status.NOT_APPLICABLE and hygiene.score is None
    assert "could not be read" in hygiene.reason and "acme.llm.completion" in hygiene.reason
    assert hygiene.evidence["unknown_answer"][0]["span_name"] == "chat my-model"
    assert by[("response_hygiene", 0)].status is Status.OK and by[("response_hygiene", 0)].passed is True
    assert by[("response_hygiene", None)].status is Status.NOT_APPLICABLE  # the thread lacks an answer
    assert "turn(s) 1" in by[("response_hygiene", None)].reason
    # metrics that read only the user's side still score
    assert by[("user_friction", 1)].status is Status.OK
    assert by[("thread_stats", None)].status is Status.OK
    assert route(results, settings.review) is None
    assert not [r for r in results if r.label == "empty"]


def test_without_the_check_the_same_thread_would_be_judged_on_a_missing_reply(settings: Settings):
    """The unknown turn has no assistant message; what makes it not_applicable is the shared check."""
    thread = mixed_thread()
    thread.turns[1].answer_unknown = None
    results = evaluate_thread(thread, build_metrics(settings, ["response_hygiene"]).deterministic)
    assert {r.turn_index: r.status for r in results}[None] is Status.OK


async def test_the_judge_is_not_asked_about_a_thread_whose_answers_it_cannot_see(settings: Settings):
    thread = mixed_thread()
    metrics = build_metrics(settings, ["response_hygiene", "task_success"])
    judge = ScriptedJudge({})  # any call would fail the test: no answers are scripted
    results = await evaluate_all(thread, metrics, judge)
    [task] = [r for r in results if r.metric == "task_success"]
    assert task.status is Status.NOT_APPLICABLE and "could not be read" in task.reason
    assert judge.requests == []


async def test_unreadable_traces_are_counted_once_and_an_empty_thread_logged_once(store: SqlStore, settings: Settings):
    no_turn = [
        Span(
            trace_id="d" * 32,
            span_id="d" * 16,
            name="acme.agent.run",
            start_ns=100,
            attributes={"session.id": "acme-1", "acme.input": "hi"},
        ),
        Span(
            trace_id="d" * 32,
            span_id="e" * 16,
            parent_id="d" * 16,
            name="acme.llm",
            start_ns=101,
            attributes={"acme.prompt": "hi", "acme.reply": "hello"},
        ),
    ]
    unknown = turn_spans("f" * 32, 200, "Hi?", UNREADABLE, conv="conv-2")
    await store.ingest(make_batch([*no_turn, *unknown], []), time.time())
    telemetry = Telemetry()
    telemetry.prime()
    pipeline = Pipeline(store, settings, build_metrics(settings), "test", telemetry=telemetry)
    with structlog.testing.capture_logs() as logs:
        await pipeline.tick(settle_all=True, deliver=False)
        for key in ("otlp:acme-1", "otlp:conv-2"):  # new data in the same traces: evaluated again
            await store.ingest(make_batch([no_turn[0] if key == "otlp:acme-1" else unknown[0]], []), time.time())
        await pipeline.tick(settle_all=True, deliver=False)
    exposition = telemetry.exposition().decode()
    assert 'tracing_eval_unreadable_spans_total{reason="no_turn"} 2.0' in exposition  # the two spans of the trace
    assert 'tracing_eval_unreadable_spans_total{reason="unknown_answer"} 1.0' in exposition
    warned = [e for e in logs if e["event"].startswith("spans but no turn could be read")]
    assert len(warned) == 1 and warned[0]["thread_key"] == "otlp:acme-1"
    assert {"acme.input", "acme.prompt", "acme.reply", "session.id"} <= set(warned[0]["attributes"])
    stored = {(s.result.metric, s.result.turn_index): s.result for s in await store.results("otlp:conv-2")}
    assert stored[("response_hygiene", 0)].status is Status.NOT_APPLICABLE
    assert await store.review_items(None) == []
