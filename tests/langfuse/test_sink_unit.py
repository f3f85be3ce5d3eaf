"""The sink's and review router's pure parts on deliveries the pipeline builds, and the settings (no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support.results import score_result
from tracing_eval.assemble import parts_from_stored, thread_from_parts
from tracing_eval.connectors.langfuse.configs import ConfigRef, config_body, score_name
from tracing_eval.connectors.langfuse.review import marked_versions, review_comment, review_object, split_key
from tracing_eval.connectors.langfuse.settings import LangfuseSettings, parse_since
from tracing_eval.connectors.langfuse.sink import LangfuseSink, Target, build_score, chunks, score_metadata, target
from tracing_eval.conventions.values import dumps
from tracing_eval.delivery import ResultDelivery
from tracing_eval.model import MetricResult, Scope, Span
from tracing_eval.pipeline import outgoing_result
from tracing_eval.sinks import PermanentSinkError
from tracing_eval.store.base import ReviewRequest, StoredThread

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_score_names_fit_langfuse_config_names():
    assert score_name("task_success") == "task_success"
    assert score_name("criterion:polite") == "criterion.polite"
    long = score_name("criterion:" + "x" * 60)
    assert len(long) == 35 and long == score_name("criterion:" + "x" * 60)
    assert long != score_name("criterion:" + "x" * 59 + "y")


def test_scores_are_cut_into_requests_under_the_body_limit_in_order():
    scores = [({"id": str(i), "comment": "x" * (50 if i != 5 else 5000)}, "2026-11-30T12:00:00Z") for i in range(10)]
    runs = list(chunks(scores, 1000))
    assert [s for run in runs for s in run] == scores  # every score once, in order
    # about 270 bytes each, three to a request; the 5,000-byte one alone
    assert [[int(s[0]["id"]) for s in run] for run in runs] == [[0, 1, 2], [3, 4], [5], [6, 7, 8], [9]]
    for run in runs:
        assert len(run) == 1 or sum(len(dumps(body)) + 200 for body, _ in run) <= 1000
    assert [len(run) for run in chunks(scores[:4] * 6, 10**6, max_scores=10)] == [10, 10, 4]  # and at most 10


def test_config_bodies():
    assert config_body("reask", None, "d") == {
        "name": "reask",
        "dataType": "NUMERIC",
        "minValue": 0.0,
        "maxValue": 1.0,
        "description": "d",
    }
    body = config_body("failure_rate", {"hallucination": 0.0, "stall": 0.4}, "d")
    assert body["dataType"] == "CATEGORICAL"
    assert body["categories"] == [{"label": "hallucination", "value": 0.0}, {"label": "stall", "value": 0.4}]


def test_turn_score_targets_the_trace_and_its_root_observation():
    result = score_result("tool_errors", 0.5, threshold=0.7, scope=Scope.TURN, turn_index=1, reason="1 of 2 failed")
    target = Target(1_764_496_800_000_000_000, trace_id="t1", observation_id="o1", environment="production")
    body = build_score("rid", result, target, ConfigRef("c1", "tool_errors", "NUMERIC"), 3)
    assert body == {
        "id": "rid",
        "name": "tool_errors",
        "traceId": "t1",
        "observationId": "o1",
        "value": 0.5,
        "dataType": "NUMERIC",
        "configId": "c1",
        "comment": "1 of 2 failed",
        "metadata": body["metadata"],
        "environment": "production",
    }
    assert (
        body["metadata"] | {"evaluator": "tracing-eval", "passed": False, "threshold": 0.7, "thread_version": 3}
        == (body["metadata"])
    )


def test_thread_score_targets_the_session_only_and_categorical_scores_send_the_label():
    result = score_result("failure_rate", 0.4, threshold=0.7, label="stall", reason="vague answers")
    body = build_score("rid", result, Target(1, session_id="s1"), ConfigRef("c2", "failure_rate", "CATEGORICAL"), 1)
    assert "traceId" not in body and "observationId" not in body and body["sessionId"] == "s1"
    assert (body["value"], body["dataType"], body["configId"]) == ("stall", "CATEGORICAL", "c2")


def test_metadata_is_provenance_and_trims_evidence():
    result = MetricResult(
        metric="task_success",
        metric_version="2",
        scope=Scope.THREAD,
        score=0.9,
        label="mostly",
        passed=True,
        threshold=0.7,
        evidence={"criteria": ["x" * 50] * 100},
        judge_model="gpt-4o-mini",
        input_tokens=1200,
        output_tokens=80,
    )
    meta = score_metadata(result, 4)
    assert meta["metric_version"] == "2" and meta["judge_model"] == "gpt-4o-mini" and meta["input_tokens"] == 1200
    assert meta["label"] == "mostly" and meta["status"] == "ok" and meta["thread_version"] == 4
    assert isinstance(meta["evidence"], str) and len(meta["evidence"]) == 1000
    assert "turn_index" not in meta and "cost_usd" not in meta  # absent values are left out


def test_thread_keys_split_into_session_or_trace():
    assert split_key("langfuse:sess-1") == ("sess-1", None)
    assert split_key("langfuse:trace:abc") == (None, "abc")
    assert review_object("langfuse:sess-1") == ("SESSION", "sess-1")
    assert review_object("langfuse:trace:abc") == ("TRACE", "abc")
    assert split_key("otlp:conv-7") == ("conv-7", None)  # received over OTLP: the conversation is the session
    assert split_key("otlp:trace:" + "ab" * 16) == (None, "ab" * 16)
    assert review_object("otlp:conv:with:colons") == ("SESSION", "conv:with:colons")


def test_review_comment_says_what_failed_and_carries_a_marker():
    reasons = [
        {"metric": "reask", "target": "thread", "score": 0.0, "threshold": 0.7, "label": "reask", "status": "ok",
         "reason": "asked for the order number twice"},
        {"metric": "user_friction", "target": "turn 2", "score": 0.5, "threshold": 0.7, "label": "friction",
         "status": "ok", "reason": "x " * 1000},
    ]  # fmt: skip
    text = review_comment("langfuse:sess 1", 3, reasons, "item-9")
    assert "`reask` (thread): score 0.00 < 0.70, label `reask` — asked for the order number twice" in text
    assert "`user_friction` (turn 2)" in text and len(text) <= 5000
    assert text.endswith("tracing-eval review · thread langfuse:sess 1 · version 3 · queue item item-9")
    comments = [{"content": text}, {"content": "a human note"}]
    assert marked_versions(comments, "langfuse:sess 1") == {3}
    assert marked_versions(comments, "langfuse:sess") == set()


def test_parse_since():
    assert parse_since("24h", NOW) == NOW - timedelta(hours=24)
    assert parse_since("90m", NOW) == NOW - timedelta(minutes=90)
    assert parse_since("7d", NOW) == NOW - timedelta(days=7)
    assert parse_since("2026-11-01", NOW) == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_since("2026-11-01T08:00:00+02:00", NOW) == datetime(2026, 11, 1, 6, tzinfo=UTC)
    with pytest.raises(ValueError, match="duration"):
        parse_since("yesterday", NOW)


def test_settings_read_the_langfuse_sdk_environment(monkeypatch: pytest.MonkeyPatch):
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings = LangfuseSettings()
    assert settings.resolved_base_url() == "https://cloud.langfuse.com" and not settings.enabled
    monkeypatch.setenv("LANGFUSE_HOST", "http://lf.internal:3000/")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-1")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-1")
    assert settings.resolved_base_url() == "http://lf.internal:3000" and settings.host == "lf.internal:3000"
    assert settings.enabled and settings.resolved_secret_key() == "sk-lf-1"
    monkeypatch.setenv("LANGFUSE_BASE_URL", "https://eu.example")
    assert settings.resolved_base_url() == "https://eu.example"
    assert LangfuseSettings(base_url="http://x").resolved_base_url() == "http://x"
    with pytest.raises(ValueError):
        LangfuseSettings(since="soon")
    with pytest.raises(ValueError):
        LangfuseSettings(unknown_key=1)


def trace_spans(trace_id: str, start: int, *, root_id: str | None = None, env: str = "production") -> list[Span]:
    root = root_id or f"{trace_id}-root"
    attrs = {"langfuse.environment": env, "langfuse.session.id": "s1"}
    user = '[{"role": "user", "content": "hi"}]'
    answer = '[{"role": "assistant", "content": "hello"}]'
    return [
        Span(trace_id=trace_id, span_id=f"{trace_id}-gen", parent_id=root, start_ns=start + 5, attributes=attrs),
        Span(
            trace_id=trace_id,
            span_id=root,
            start_ns=start,
            attributes={**attrs, "langfuse.trace.input": user, "langfuse.trace.output": answer},
        ),
    ]


def deliveries(key: str, traces: dict[str, list[Span]], results: list[MetricResult]) -> list[ResultDelivery]:
    """The deliveries of `results` as the pipeline builds them: the thread assembled from what the
    store holds, each result anchored on it, made the outbox's delivery at version 2."""
    stored = StoredThread(key, traces=traces, revisions={t: 1 for t in traces})
    parts, _ = parts_from_stored(stored)
    thread = thread_from_parts(key, parts, version=2)
    return [outgoing_result(thread, r, parts).delivery(key, 2) for r in results]


def test_deliveries_built_by_the_pipeline_target_the_session_the_trace_and_its_root_observation():
    """A session's thread result scores the session at its earliest trace's start (a trace that
    yielded no turn counts too); a turn result scores its trace's root observation at the root's
    start; both carry the trace's environment."""
    silent = [Span(trace_id="t0", span_id="t0-root", start_ns=500, attributes={"langfuse.environment": "staging"})]
    traces = {"t2": trace_spans("t2", 2000), "t1": trace_spans("t1", 1000), "t0": silent}
    thread_result = score_result("m", 1.0, threshold=0.5)
    turn_result = score_result("m", 1.0, threshold=0.5, scope=Scope.TURN, turn_index=1)
    on_thread, on_turn = deliveries("langfuse:s1", traces, [thread_result, turn_result])
    assert (on_thread.session_id, on_thread.target, on_turn.target) == ("s1", "thread", "trace:t2")
    assert target(on_thread) == Target(500, session_id="s1", environment="staging")
    assert target(on_turn) == Target(2000, trace_id="t2", observation_id="t2-root", environment="production")
    body = build_score(on_turn.result_id, turn_result, target(on_turn), None, on_turn.thread_version)
    assert (body["traceId"], body["observationId"], body["environment"]) == ("t2", "t2-root", "production")
    assert body["metadata"]["thread_version"] == 2


def test_a_lone_trace_with_a_virtual_root_scores_the_trace_without_an_observation():
    """A thread without a session is its one trace; a v3 trace's virtual root (`t-...`) is no
    observation, and an environment Langfuse would refuse is left out."""
    traces = {"t3": trace_spans("t3", 3000, root_id="t-t3", env="Not Valid")}
    thread_result = score_result("m", 1.0, threshold=0.5)
    turn_result = score_result("m", 1.0, threshold=0.5, scope=Scope.TURN, turn_index=0)
    on_thread, on_turn = deliveries("langfuse:trace:t3", traces, [thread_result, turn_result])
    assert on_thread.session_id is None and on_thread.anchor.environment == "Not Valid"
    assert target(on_thread) == Target(3000, trace_id="t3")
    assert target(on_turn) == Target(3000, trace_id="t3")


def test_a_turn_result_whose_anchor_is_another_trace_is_refused():
    [d] = deliveries(
        "langfuse:s1", {"t1": trace_spans("t1", 1000)}, [score_result("m", 1.0, threshold=0.5, turn_index=0)]
    )
    with pytest.raises(PermanentSinkError, match="anchor is trace 't1'"):
        target(d.model_copy(update={"target": "trace:t9"}))


async def test_review_routing_can_be_switched_off():
    settings = LangfuseSettings(base_url="http://127.0.0.1:9", public_key="pk", secret_key="sk", review_queue="")
    sink = LangfuseSink(settings)
    try:
        assert sink.review is None
        await sink.deliver(ReviewRequest([]).delivery(1, "langfuse:s", 1))  # nothing to do, nothing sent
    finally:
        await sink.aclose()
