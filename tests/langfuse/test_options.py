"""Read filters, backfill, the score write paths, verdict configs and reuse of existing configs/queues."""

from __future__ import annotations

import gc
import json
import time
import weakref
from collections import Counter
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import EXAMPLES
from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.langfuse_harness import (
    FAILING_TURNS,
    OK_TURNS,
    QUEUE,
    Worker,
    assert_reads_bounded,
    assert_routed_once,
    assert_scores_match,
    lf_settings,
    ms,
    outbox_deliveries,
    scored_results,
    seed_standard,
)
from tracing_eval.assemble import thread_from_traces
from tracing_eval.config import JudgeSettings, Settings
from tracing_eval.connectors.langfuse import LangfuseClient, LangfuseError, LangfuseSink
from tracing_eval.connectors.langfuse.configs import REVIEW_CONFIG
from tracing_eval.connectors.langfuse.sink import ScoreWriter
from tracing_eval.connectors.langfuse.source import V4_FIELDS
from tracing_eval.connectors.otlp.file_source import OtlpFileSource
from tracing_eval.identity import is_sampled
from tracing_eval.judge import JudgeClient
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.metrics.judged.base import V5_MINUS
from tracing_eval.pipeline import Pipeline
from tracing_eval.sinks import PermanentSinkError
from tracing_eval.store.sql import SqlStore


async def test_environment_tags_and_trace_name_filters(settings: Settings, server: FakeLangfuseServer):
    server.seed_session("prod-chat", OK_TURNS, environment="production", tags=["support", "web"])
    server.seed_session("staging-chat", OK_TURNS, environment="staging", tags=["support"])
    server.seed_session("prod-untagged", OK_TURNS, environment="production")
    server.seed_session("prod-batch", OK_TURNS, environment="production", tags=["support"], trace_name="batch")
    server.seed_session("prod-self", OK_TURNS, environment="production", tags=["support", "tracing-eval"])
    lf = lf_settings(server, environments=["production"], tags=["support"], trace_names=["chat-turn"])
    worker = await Worker(settings, server, lf).start()
    try:
        await worker.settle()
        assert await worker.store.thread_keys() == ["langfuse:prod-chat"]
        await assert_scores_match(worker.store, server)
    finally:
        await worker.stop()
    reads = [r for r in server.requests if r.endpoint in ("GET /api/public/v2/observations", "GET /api/public/traces")]
    reads = [r for r in reads if ("limit", "1") not in r.query]  # not the generation probe
    assert all(("environment", "production") in r.query for r in reads)  # filtered by the server
    if server.mode == "v3":
        assert all(("tags", "support") in r.query and ("name", "chat-turn") in r.query for r in reads)
        assert server.count("GET /api/public/traces/{traceId}") == 2  # details only for traces that pass
    server.assert_no_violations()


async def test_sampling_is_deterministic_by_session_and_pages_are_followed(
    settings: Settings, server: FakeLangfuseServer
):
    sessions = [f"sess-{i}" for i in range(12)]
    for s in sessions:
        server.seed_session(s, OK_TURNS[:1])
    worker = await Worker(settings, server, lf_settings(server, sample_rate=0.5, page_size=3)).start()
    try:
        await worker.settle()
        expected = sorted(f"langfuse:{s}" for s in sessions if is_sampled(f"langfuse:{s}", 0.5))
        assert 0 < len(expected) < len(sessions)
        assert await worker.store.thread_keys() == expected
        await assert_scores_match(worker.store, server)
    finally:
        await worker.stop()
    pages = [r for r in server.requests if ("cursor" in dict(r.query)) or ("page", "2") in r.query]
    assert pages  # small pages: the whole window is read page by page (cursor on v4, page numbers on v3)
    server.assert_no_violations()


async def test_backfill_window_and_backfill_since(settings: Settings, server: FakeLangfuseServer):
    server.seed_session("old", OK_TURNS, start=server.now() - timedelta(days=3))
    server.seed_session("recent", OK_TURNS)
    lf = lf_settings(server, since="24h", window_seconds=86400)
    worker = await Worker(settings, server, lf).start()
    try:
        await worker.settle()
        assert await worker.store.thread_keys() == ["langfuse:recent"]

        await worker.restart(backfill_since=server.now() - timedelta(days=4))  # `tracing-eval backfill --since 4d`
        await worker.settle()
        assert await worker.store.thread_keys() == ["langfuse:old", "langfuse:recent"]
        await assert_scores_match(worker.store, server)
        old_thread = next(r for r in await scored_results(worker.store) if r.thread_key == "langfuse:old")
        row = next(r for r in server.scores if r.id == old_thread.id)
        assert row.timestamp < ms(server.now() - timedelta(days=2))  # scores keep the old traces' time
    finally:
        await worker.stop()
    assert_reads_bounded(server)
    server.assert_no_violations()


def judge_answers(request: dict[str, Any]) -> Reply:
    """The fake judge: a fixed verdict per metric (the schema name of the request, or each part of a
    batched `thread_metrics` request)."""
    spec = request["response_format"]["json_schema"]
    answers = {
        "repetitive_pattern": {"repeated_segments": [], "reason": "Asks again.", "verdict": "mostly"},
        "failure_rate": {"evidence": [], "reason": "It stalls.", "verdict": "stall"},
    }
    if spec["name"] == "thread_metrics":
        return Reply(json.dumps({name: answers[name] for name in spec["schema"]["properties"]}))
    return Reply(json.dumps(answers[spec["name"]]))


async def test_verdict_metrics_write_categorical_scores(settings: Settings, server: FakeLangfuseServer):
    server.seed_session("s-fail", FAILING_TURNS)
    with FakeOpenAIServer(judge_answers) as llm:
        judge = JudgeClient(JudgeSettings(model="gpt-4o-mini", base_url=llm.base_url, api_key="test", cache=False))
        metrics = ["repetitive_pattern", "failure_rate", "reask"]
        worker = Worker(settings, server, lf_settings(server), judge=judge, metrics=metrics)
        await worker.start()
        try:
            await worker.settle()
            await assert_scores_match(worker.store, server)
            await assert_routed_once(worker.store, server)
        finally:
            await worker.stop()
            await judge.close()
    rows = {r.name: r for r in server.scores}
    configs = {c.name: c for c in server.score_configs}
    row = rows["repetitive_pattern"]
    assert (row.data_type, row.string_value, row.value, row.session_id) == ("CATEGORICAL", "mostly", 0.3, "s-fail")
    assert (
        row.metadata is not None and row.metadata["judge_model"] == "gpt-4o-mini" and row.metadata["label"] == "mostly"
    )
    assert {c["label"]: c["value"] for c in configs["repetitive_pattern"].categories or []} == V5_MINUS
    # FR6 gives three labels the same score; Langfuse needs distinct category values: numeric, label in metadata
    row = rows["failure_rate"]
    assert (row.data_type, row.value, configs["failure_rate"].data_type) == ("NUMERIC", 0.4, "NUMERIC")
    assert row.metadata is not None and row.metadata["label"] == "stall"
    [queue] = server.queues
    assert {configs["repetitive_pattern"].id, configs["failure_rate"].id} <= set(queue.score_config_ids)
    server.assert_no_violations()


async def test_existing_configs_and_queue_are_reused(settings: Settings, server: FakeLangfuseServer):
    reask = server.seed_score_config("reask", "NUMERIC", min_value=0, max_value=1)
    clash = server.seed_score_config("user_friction", "CATEGORICAL", categories=[{"label": "angry", "value": 0}])
    queue = server.seed_queue(QUEUE, [reask.id])
    server.seed_session("s-fail", FAILING_TURNS)
    worker = await Worker(settings, server, lf_settings(server)).start()
    try:
        await worker.settle()
        results = await scored_results(worker.store)
    finally:
        await worker.stop()
    names = Counter(c.name for c in server.score_configs)
    assert names["reask"] == 1 and names["user_friction"] == 1 and REVIEW_CONFIG not in names
    assert [q.id for q in server.queues] == [queue.id]
    assert [(i.queue_id, i.object_id) for i in server.queue_items] == [(queue.id, "s-fail")]
    by_id = {r.id: r for r in server.scores}
    assert set(by_id) == {r.id for r in results}
    for stored in results:
        row = by_id[stored.id]
        if row.name == "reask":
            assert row.config_id == reask.id
        if row.name == "user_friction":  # a config of that name that cannot hold the scores: no configId
            assert row.config_id is None and row.data_type == "NUMERIC"
    assert clash.id not in {r.config_id for r in by_id.values()}
    server.assert_no_violations()


async def test_threads_received_over_otlp_are_scored_with_their_otel_ids(
    settings: Settings, server: FakeLangfuseServer
):
    """An app exporting to Langfuse and to the sidecar: the scores land on Langfuse's copies of the
    same traces (hex trace id, root span id as observation) and sessions (`gen_ai.conversation.id`)."""
    settings.sinks.max_attempts = 1
    store = SqlStore(settings.store.url)
    await store.open()
    sink = LangfuseSink(lf_settings(server))
    pipeline = Pipeline(
        store=store,
        settings=settings,
        metrics=build_metrics(settings),
        owner="test",
        sources=[OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)],
        sinks=[sink],
    )
    try:
        await pipeline.sources[0].pull(store, time.time())
        for state in await store.thread_states():  # Langfuse's copies of the sessions (comments need them)
            server.seed_session(state["conversation_id"], OK_TURNS[:1])
        stats = await pipeline.tick(settle_all=True)
        assert stats.threads_evaluated > 0 and stats.delivery.failed == 0 and stats.delivery.retried == 0
        written = {r.id: r for r in server.scores}
        expected = await scored_results(store)
        assert set(written) == {r.id for r in expected}
        for stored in expected:
            row = written[stored.id]
            thread = thread_from_traces(stored.thread_key, await store.load_traces(stored.thread_key))
            if stored.target == "thread":
                assert (row.session_id, row.trace_id) == (thread.conversation_id, None)
                assert stored.thread_key == f"otlp:{thread.conversation_id}"
            else:
                [turn] = [t for t in thread.turns if f"trace:{t.trace_id}" == stored.target]
                assert (row.trace_id, row.observation_id, row.session_id) == (turn.trace_id, turn.root_span_id, None)
                assert len(row.trace_id or "") == 32 and len(row.observation_id or "") == 16
        routed = {i.thread_key for i in await store.review_items()}
        assert routed, "the examples hold failing threads"
        assert Counter((i.object_type, i.object_id) for i in server.queue_items) == Counter(
            ("SESSION", key.removeprefix("otlp:")) for key in routed
        )
    finally:
        await pipeline.close()
        await store.close()
    server.assert_no_violations()


@pytest.mark.parametrize("write", ["scores", "auto"])
async def test_batch_scores_endpoint_with_timestamps(settings: Settings, write: str):
    with FakeLangfuseServer("v4", score_batches=True) as server:
        server.seed_session("s-fail", FAILING_TURNS)
        if write == "auto":  # a server without /ingestion: the sink moves to POST /scores
            server.fail_next(1, status=404, path="/api/public/ingestion")
        worker = await Worker(settings, server, lf_settings(server, score_write=write)).start()
        try:
            await worker.settle()
            await assert_scores_match(worker.store, server)
            await assert_routed_once(worker.store, server)
            writes = server.score_requests
            assert writes and all(w.endpoint == "POST /api/public/scores" for w in writes)
            assert all(w.body["timestamp"] for w in writes)

            server.advance(timedelta(days=2))  # a redelivery days later still lands on the same rows
            rows = len(server.scores)
            for delivery in await outbox_deliveries(worker.store, "langfuse", "result"):
                await worker.sink.deliver(delivery)
            assert len(server.scores) == rows and all(w.replaced for w in server.score_requests[len(writes) :])
        finally:
            await worker.stop()
        server.assert_no_violations()


async def test_a_sent_body_is_freed_at_once_not_at_the_next_garbage_collection():
    """httpx keeps each request in a reference cycle: the client's requests, and the JSON bodies they
    carry, go as soon as their responses are read (the sidecar's collector runs rarely)."""
    sent: list[tuple[weakref.ref[httpx.Request], int]] = []

    async def keep(request: httpx.Request) -> None:
        sent.append((weakref.ref(request), len(request.content)))

    score = {"id": "x", "name": "reask", "traceId": "t", "value": 1.0, "dataType": "NUMERIC"}
    with FakeLangfuseServer("v4") as server:
        client = LangfuseClient(lf_settings(server))
        client._http.event_hooks["request"].append(keep)
        gc.disable()
        try:
            for n in range(3):
                await ScoreWriter(client, "ingestion").write([({**score, "id": f"x{n}"}, "2026-11-30T10:00:00.000Z")])
            assert len(sent) == 3 and [ref() for ref, _ in sent] == [None, None, None]
        finally:
            gc.enable()
            await client.aclose()
        assert len(server.scores) == 3
        [headers] = {(r.headers["content-type"], r.headers["content-length"]) for r in server.requests}
        assert headers == ("application/json", str(sent[0][1]))
        server.assert_no_violations()


async def test_a_read_response_is_freed_at_once_not_at_the_next_garbage_collection():
    """The client's own calls and the Langfuse SDK's (pages of observations) leave no response
    waiting for the collector: a page read is freed with its last reference."""
    seen: list[weakref.ref[httpx.Response]] = []

    async def keep(response: httpx.Response) -> None:
        seen.append(weakref.ref(response))

    with FakeLangfuseServer("v4") as server:
        seed_standard(server)
        client = LangfuseClient(lf_settings(server))
        client._http.event_hooks["response"].append(keep)
        end = server.now()
        gc.disable()
        try:
            assert await client.get_json("/health")
            page, _ = await client.observations(start=end - timedelta(days=1), end=end, fields=V4_FIELDS, limit=50)
            assert page
            assert len(seen) == 2 and [r() for r in seen] == [None, None]
        finally:
            gc.enable()
            await client.aclose()
        server.assert_no_violations()


@pytest.mark.parametrize("batches", [False, True])
async def test_rejected_scores_are_permanent_failures(batches: bool):
    with FakeLangfuseServer("v4", score_batches=batches) as server:
        client = LangfuseClient(lf_settings(server))
        writer = ScoreWriter(client, "scores" if batches else "ingestion")
        both_targets = {
            "id": "x",
            "name": "reask",
            "traceId": "t",
            "sessionId": "s",
            "value": 1.0,
            "dataType": "NUMERIC",
        }
        try:
            if batches:  # a 207 is never retried: it would duplicate the accepted scores of the batch
                with pytest.raises(PermanentSinkError, match="rejected"):
                    await writer.write([(both_targets, "2026-11-30T10:00:00.000Z")])
            else:  # /ingestion answers 207 with a per-event 400
                with pytest.raises(LangfuseError) as failure:
                    await writer.write([(both_targets, "2026-11-30T10:00:00.000Z")])
                assert failure.value.status == 400 and failure.value.permanent
        finally:
            await client.aclose()
        assert server.scores == [] and len(server.requests) == 1
        assert any("exactly one target" in v for v in server.take_violations())  # the fake flags the bad score
        server.assert_no_violations()
