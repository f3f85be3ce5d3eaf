"""A trace that joins its conversation late (issue 14, item 6), on SQLite and PostgreSQL.

An agent turn longer than `turn_settle_seconds` exports its `chat` child before its root: the child
has no conversation id, so the trace is first a thread of its own (`otlp:trace:<id>`) and is evaluated
as one. When the root arrives with `gen_ai.conversation.id`, the trace moves into the conversation:
the stand-alone thread's results leave `results`, its deliveries not yet made are dropped, the sinks
that had them get a `retract` row (Langfuse deletes the score), and its review items are superseded.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from tests.conftest import BACKENDS
from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.otlp_payloads import trace_request
from tests.support.results import score_result
from tracing_eval.config import ReceiverSettings, Settings
from tracing_eval.connectors.langfuse import LangfuseSettings, LangfuseSink
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import Scope, Span
from tracing_eval.pipeline import Pipeline
from tracing_eval.store import schema
from tracing_eval.store.base import IngestBatch, Outgoing, Readiness, ReviewRequest
from tracing_eval.store.sql import SqlStore

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
PB = {"content-type": "application/x-protobuf"}


def late_turn(conversation: str) -> tuple[bytes, bytes]:
    """One agent turn, as two exports: the `chat` child (no conversation id: the agent sets it on
    its root), then the root with `gen_ai.conversation.id`."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation},
    ):
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Where is my order A48213?"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "It ships tomorrow."}]}]
                ),
            },
        ):
            pass
    chat, root = exporter.get_finished_spans()  # the child ends (and is exported) first
    return trace_request([chat]).SerializeToString(), trace_request([root]).SerializeToString()


def client(receiver: OtlpReceiver) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=Starlette(routes=receiver.routes())), base_url="http://receiver"
    )


async def outbox(store: SqlStore) -> list[dict[str, Any]]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(schema.outbox.select().order_by(schema.outbox.c.id))
        return [dict(r._mapping) for r in rows]


async def test_a_late_root_supersedes_the_stand_alone_thread_and_langfuse_deletes_its_scores(
    store: SqlStore, settings: Settings
) -> None:
    child, root = late_turn("conv-late")
    with FakeLangfuseServer("v4") as langfuse:
        lf = LangfuseSettings(
            base_url=langfuse.base_url,
            public_key=langfuse.public_key,
            secret_key=langfuse.secret_key,
            timeout_seconds=5,
            retry_backoff_seconds=0.05,
        )
        sink = LangfuseSink(lf)
        pipeline = Pipeline(
            store=store,
            settings=settings,
            metrics=build_metrics(settings, ["response_hygiene", "thread_stats"]),
            owner="test-worker",
            sinks=[sink],
        )
        rx = OtlpReceiver(store, ReceiverSettings())
        try:
            async with client(rx) as c:
                assert (await c.post("/v1/traces", content=child, headers=PB)).status_code == 200
                [alone] = await store.thread_keys()
                assert alone.startswith("otlp:trace:")
                first = await pipeline.tick(settle_all=True)  # the child alone has settled: evaluated
                assert first.threads_evaluated == 1 and first.delivery.delivered > 0
                before = {r.id for r in await store.results()}
                assert before and {r.thread_key for r in await store.results()} == {alone}
                scored = {s.id for s in langfuse.scores}
                assert scored and scored <= before

                assert (await c.post("/v1/traces", content=root, headers=PB)).status_code == 200
            assert await store.thread_keys() == ["otlp:conv-late"]
            assert not [r for r in await store.results() if r.thread_key == alone]  # gone from `results`
            retract = [r for r in await outbox(store) if r["kind"] == "retract"]
            assert {r["ref"] for r in retract} == {
                r["ref"] for r in await outbox(store) if r["kind"] == "result" and r["ref"] in before
            }
            assert all(json.loads(r["payload"])["merged_into"] == "otlp:conv-late" for r in retract)

            second = await pipeline.tick(settle_all=True)
            assert second.threads_evaluated == 1
            results = await store.results()
            assert {r.thread_key for r in results} == {"otlp:conv-late"}
            targets = [r.target for r in results if r.result.metric == "response_hygiene"]
            assert len(targets) == len(set(targets))  # one result per target, not one per thread the trace was in
            assert any(t.startswith("trace:") for t in targets)
            assert set(langfuse.deleted_scores) == scored  # every score of the vanished thread is deleted
            assert {s.id for s in langfuse.scores} == {r.id for r in results if r.result.score is not None}
            assert not langfuse.violations
            pending = [r for r in await outbox(store) if r["delivered_at"] is None and not r["failed"]]
            assert pending == []
        finally:
            await pipeline.close()


async def test_a_merge_drops_undelivered_rows_and_waits_out_a_delivery_in_progress(store: SqlStore) -> None:
    """Deliveries of the vanished thread not yet made are dropped; a retraction is due no earlier than
    the lease of a delivery another replica may be making, so it cannot overtake that delivery."""

    trace = "ab" * 16
    chat = Span(trace_id=trace, span_id="1" * 16, parent_id="2" * 16, name="chat", start_ns=5)
    rootspan = Span(trace_id=trace, span_id="2" * 16, name="invoke_agent", start_ns=1)
    await store.ingest(IngestBatch(spans=[chat]), 100.0)
    [claim] = await store.claim("w", 200.0, Readiness(0, 0), 10, 60)
    results = [score_result(m, 1.0, threshold=0.7, scope=Scope.THREAD) for m in ("a", "b", "c")]
    outgoing = [Outgoing(f"id-{r.metric}", "thread", r) for r in results]
    review = ReviewRequest([{"metric": "a"}], sinks=["webhook"])
    assert await store.record(claim, outgoing, review, ["langfuse", "otlp"], 200.0)
    rows = {(r["sink"], r["ref"]): r for r in await outbox(store)}
    await store.outbox_done([rows[("langfuse", "id-a")]["id"], rows[("otlp", "id-a")]["id"]], 210.0)
    taken = await store.pending_outbox("langfuse", 220.0, 1, lease_seconds=500)  # id-b: being delivered
    assert [r.ref for r in taken] == ["id-b"]

    await store.ingest(IngestBatch(spans=[rootspan], conversations={trace: "conv"}), 300.0)
    assert await store.thread_keys() == ["otlp:conv"]
    assert await store.results() == []
    left = await outbox(store)
    assert {(r["sink"], r["ref"]) for r in left if r["kind"] == "result"} == {("langfuse", "id-a"), ("otlp", "id-a")}
    assert not [r for r in left if r["kind"] == "review"]  # the review delivery was not made: dropped
    due = {(r["sink"], r["ref"]): r["next_attempt_at"] for r in left if r["kind"] == "retract"}
    lease_end = 720.0 if store.dialect == "postgresql" else 300.0  # SQLite takes no lease
    assert due == {
        ("langfuse", "id-a"): 300.0,
        ("langfuse", "id-b"): lease_end,
        ("langfuse", "id-c"): 300.0,
        ("otlp", "id-a"): 300.0,
        ("otlp", "id-b"): 300.0,
        ("otlp", "id-c"): 300.0,
    }
    [item] = await store.review_items(status=None)
    assert (item.status, item.resolution) == ("superseded", "merged into otlp:conv")
