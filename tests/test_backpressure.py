"""Backpressure of the OTLP receiver: 429 while the sinks are behind, 503 beyond the pending-request
bound, both with Retry-After and before the body is read; and the real SDK exporter retrying through it.

Deadlines below are liveness guards only (a hung test fails instead of hanging), never speed checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
import structlog
import uvicorn
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from sqlalchemy import func, select
from starlette.applications import Starlette

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, to_otlp_json, trace_request
from tests.support.results import score_result
from tracing_eval import server as http_server
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.receiver import REJECT_REASONS, OtlpReceiver
from tracing_eval.delivery import Delivery
from tracing_eval.sinks import BaseSink, deliver_outbox
from tracing_eval.store import schema
from tracing_eval.store.base import Outgoing
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry

PB = {"content-type": "application/x-protobuf"}
JS = {"content-type": "application/json"}
T0 = 1_700_000_000.0
LIVENESS_SECONDS = 60.0


def turn(conversation: str) -> Any:
    return genai_turn_spans(conversation, "Where is my order A48213?", "It ships tomorrow.")


def protobuf(conversation: str) -> bytes:
    return trace_request(turn(conversation)).SerializeToString()


def client(receiver: OtlpReceiver) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=Starlette(routes=receiver.routes())), base_url="http://receiver"
    )


class Clock:
    """A clock the test moves by hand (the receiver's backlog reading is cached by it)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class WatchedStore:
    """A real store whose backlog reads are counted and can be made to fail, and whose ingests can
    be held until the test lets them go."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.backlog_reads = 0
        self.backlog_error: Exception | None = None
        self.hold_ingest: asyncio.Event | None = None
        self.ingests_waiting = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def outbox_stats(self, now: float) -> dict[str, tuple[int, float]]:
        self.backlog_reads += 1
        if self.backlog_error is not None:
            raise self.backlog_error
        return await self._store.outbox_stats(now)

    async def ingest(self, batch: Any, now: float) -> Any:
        if self.hold_ingest is not None:
            self.ingests_waiting += 1
            try:
                await self.hold_ingest.wait()
            finally:
                self.ingests_waiting -= 1
        return await self._store.ingest(batch, now)


class AcceptingSink(BaseSink):
    """A sink that takes every delivery (or the first `capacity`, then fails): draining the outbox
    with it is the sinks catching up."""

    def __init__(self, name: str, capacity: int | None = None) -> None:
        self.name = name
        self.capacity = capacity
        self.delivered = 0

    async def deliver(self, delivery: Delivery) -> None:
        if self.capacity is not None and self.delivered >= self.capacity:
            raise ConnectionError("the sink is down again")
        self.delivered += 1


async def fill_outbox(store: SqlStore, sink: str, waiting: int, *, done: int = 0, parked: int = 0) -> None:
    """`waiting` rows due for `sink`, plus `done` delivered and `parked` failed ones (which never count)."""
    payload = Outgoing("r", "thread", score_result("m", 1.0, threshold=0.5)).delivery("otlp:c", 1).payload()
    row = {"sink": sink, "kind": "result", "digest": "-", "payload": payload, "created_at": T0, "next_attempt_at": 0.0}
    rows = [{**row, "ref": f"{sink}-w{i}", "delivered_at": None, "failed": False} for i in range(waiting)]
    rows += [{**row, "ref": f"{sink}-d{i}", "delivered_at": T0, "failed": False} for i in range(done)]
    rows += [{**row, "ref": f"{sink}-p{i}", "delivered_at": None, "failed": True} for i in range(parked)]
    async with store.engine.begin() as conn:
        await conn.execute(schema.outbox.insert(), rows)


async def stored_spans(store: SqlStore) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(schema.spans))).scalar() or 0)


def status_of(r: httpx.Response) -> status_pb2.Status:
    st = status_pb2.Status()
    if r.headers["content-type"].startswith("application/json"):
        json_format.Parse(r.content, st)
    else:
        st.ParseFromString(r.content)
    return st


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll `check` until it holds; the deadline only keeps a broken test from hanging."""
    deadline = time.monotonic() + LIVENESS_SECONDS
    while True:
        result = check()
        if result if isinstance(result, bool) else await result:
            return
        assert time.monotonic() < deadline, f"liveness guard: {what} never happened"
        await asyncio.sleep(0.01)


# -- the sinks are behind: 429 ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_a_sink_backlog_at_the_limit_gets_429_and_stores_nothing_until_it_drains(store: SqlStore) -> None:
    await fill_outbox(store, "webhook", 3, done=5, parked=5)  # 3 waiting; delivered and parked rows do not count
    telemetry, clock = Telemetry(), Clock()
    settings = ReceiverSettings(max_outbox_backlog=3, retry_after_seconds=7)
    rx = OtlpReceiver(store, settings, clock=clock, telemetry=telemetry)
    async with client(rx) as c:
        pb = await c.post("/v1/traces", content=protobuf("conv-pb"), headers=PB)
        js = await c.post("/v1/traces", content=json.dumps(to_otlp_json(trace_request(turn("conv-js")))), headers=JS)
        logs = await c.post("/v1/logs", content=b"{}", headers=JS)
        garbage = await c.post("/v1/traces", content=b"\x0a\xff\xff\xff", headers=PB)  # the body is never read

        for r in (pb, js, logs, garbage):
            assert r.status_code == 429, r.text
            assert r.headers["retry-after"] == "7"
            st = status_of(r)
            assert st.code == 8  # RESOURCE_EXHAUSTED
            assert st.message == (
                "the sinks are behind (3 deliveries wait in the outbox; the limit is 3); retry later"
            ), st.message
        assert pb.headers["content-type"] == "application/x-protobuf"
        assert js.headers["content-type"] == "application/json"
        assert await store.thread_keys() == [] and await stored_spans(store) == 0
        assert rx.counters.rejected == {"sinks_behind": 4} and rx.counters.spans == 0
        assert (
            telemetry.registry.get_sample_value("tracing_eval_receiver_rejects_total", {"reason": "sinks_behind"}) == 4
        )

        # the sink takes one row: the backlog is below the limit, and the next reading lets requests in
        sink = AcceptingSink("webhook", capacity=1)
        stats = await deliver_outbox(store, [sink], time.time(), max_attempts=10, limit=1)  # type: ignore[list-item]
        assert stats.delivered == 1
        clock.now += 1.0
        ok = await c.post("/v1/traces", content=protobuf("conv-after"), headers=PB)
    assert ok.status_code == 200
    assert await store.thread_keys() == ["otlp:conv-after"]
    assert rx.counters.rejected == {"sinks_behind": 4}


async def test_the_backlog_is_read_at_most_once_per_interval(store: SqlStore) -> None:
    watched, clock = WatchedStore(store), Clock()
    rx = OtlpReceiver(watched, ReceiverSettings(max_outbox_backlog=10), clock=clock)  # type: ignore[arg-type]
    body = protobuf("conv-1")
    async with client(rx) as c:
        for _ in range(5):
            assert (await c.post("/v1/traces", content=body, headers=PB)).status_code == 200
        assert watched.backlog_reads == 1
        answers = await asyncio.gather(*(c.post("/v1/traces", content=body, headers=PB) for _ in range(8)))
        assert [r.status_code for r in answers] == [200] * 8
        assert watched.backlog_reads == 1  # concurrent requests share the reading

        clock.now += 0.999
        await c.post("/v1/traces", content=body, headers=PB)
        assert watched.backlog_reads == 1
        clock.now += 0.001
        await c.post("/v1/traces", content=body, headers=PB)
        assert watched.backlog_reads == 2
        clock.now -= 3600  # the clock went back: read again rather than trust the old reading for an hour
        await c.post("/v1/traces", content=body, headers=PB)
        assert watched.backlog_reads == 3

        # the backlog reaches the limit: the cached reading still says 0 until the interval has passed
        await fill_outbox(store, "otlp", 10)
        assert (await c.post("/v1/traces", content=body, headers=PB)).status_code == 200
        clock.now += 1.0
        assert (await c.post("/v1/traces", content=body, headers=PB)).status_code == 429
        assert watched.backlog_reads == 4


async def test_only_the_receivers_sinks_count_and_without_outbox_sinks_the_store_is_not_read(store: SqlStore) -> None:
    await fill_outbox(store, "langfuse", 5)  # left behind by a sink that is no longer enabled
    watched = WatchedStore(store)
    settings = ReceiverSettings(max_outbox_backlog=5)
    for sinks, reads in ((["webhook"], 1), ([], 0)):
        rx = OtlpReceiver(watched, settings, sinks=sinks)  # type: ignore[arg-type]
        watched.backlog_reads = 0
        async with client(rx) as c:
            assert (await c.post("/v1/traces", content=protobuf("conv-1"), headers=PB)).status_code == 200
        assert watched.backlog_reads == reads
    async with client(OtlpReceiver(store, settings, sinks=["langfuse", "webhook"])) as c:
        assert (await c.post("/v1/traces", content=protobuf("conv-2"), headers=PB)).status_code == 429
    async with client(OtlpReceiver(store, ReceiverSettings(max_outbox_backlog=0))) as c:  # 0: off
        assert (await c.post("/v1/traces", content=protobuf("conv-3"), headers=PB)).status_code == 200
    assert await store.thread_keys() == ["otlp:conv-1", "otlp:conv-3"]


async def test_a_failing_backlog_read_lets_requests_through(store: SqlStore) -> None:
    await fill_outbox(store, "otlp", 50)  # over the limit, but the reading fails
    watched, clock = WatchedStore(store), Clock()
    watched.backlog_error = OSError("database is locked")
    rx = OtlpReceiver(watched, ReceiverSettings(max_outbox_backlog=10), clock=clock)  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        async with client(rx) as c:
            answers = [await c.post("/v1/traces", content=protobuf(f"conv-{i}"), headers=PB) for i in range(3)]
            assert [r.status_code for r in answers] == [200, 200, 200]
            assert watched.backlog_reads == 1  # a failed read is not retried by every request
            assert await store.thread_keys() == ["otlp:conv-0", "otlp:conv-1", "otlp:conv-2"]

            watched.backlog_error = None  # the store answers again: the backlog is enforced
            clock.now += 1.0
            assert (await c.post("/v1/traces", content=protobuf("conv-3"), headers=PB)).status_code == 429
    warnings = [e for e in logs if e["event"] == "cannot read the outbox backlog; accepting requests"]
    assert len(warnings) == 1 and "OSError: database is locked" in warnings[0]["error"]
    assert rx.counters.rejected == {"sinks_behind": 1}


async def test_a_backlog_read_that_hangs_lets_requests_through_after_the_write_timeout(store: SqlStore) -> None:
    class Hanging(WatchedStore):
        async def outbox_stats(self, now: float) -> dict[str, tuple[int, float]]:
            self.backlog_reads += 1
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")

    watched = Hanging(store)
    settings = ReceiverSettings(max_outbox_backlog=10, write_timeout_seconds=0.05)
    async with client(OtlpReceiver(watched, settings)) as c:  # type: ignore[arg-type]
        r = await c.post("/v1/traces", content=protobuf("conv-1"), headers=PB)
    assert r.status_code == 200 and watched.backlog_reads == 1
    assert await store.thread_keys() == ["otlp:conv-1"]


# -- too many requests in progress: 503 -------------------------------------------------------------------


async def test_requests_beyond_max_pending_get_503_before_their_body_is_read(store: SqlStore) -> None:
    watched = WatchedStore(store)
    watched.hold_ingest = asyncio.Event()
    telemetry = Telemetry()
    settings = ReceiverSettings(
        max_pending_requests=3, max_concurrent_writes=1, write_timeout_seconds=LIVENESS_SECONDS, retry_after_seconds=4
    )
    rx = OtlpReceiver(watched, settings, telemetry=telemetry)  # type: ignore[arg-type]
    async with client(rx) as c:
        held = [asyncio.create_task(c.post("/v1/traces", content=protobuf(f"held-{i}"), headers=PB)) for i in range(3)]
        # one request writes (held in the store), two wait for the write slot: three in progress
        await eventually(lambda: watched.ingests_waiting == 1 and rx.pending == 3, "three requests in progress")

        refused = await c.post("/v1/traces", content=protobuf("refused"), headers=PB)
        garbage = await c.post("/v1/traces", content=b"{not json", headers=JS)  # refused before it is read
        for r in (refused, garbage):
            assert r.status_code == 503 and r.headers["retry-after"] == "4"
            assert status_of(r).code == 14  # UNAVAILABLE
            assert status_of(r).message == "too many requests in progress; retry later"
        assert rx.counters.rejected == {"overloaded": 2}
        assert telemetry.registry.get_sample_value("tracing_eval_receiver_rejects_total", {"reason": "overloaded"}) == 2

        watched.hold_ingest.set()
        answers = await asyncio.wait_for(asyncio.gather(*held), LIVENESS_SECONDS)
        assert [r.status_code for r in answers] == [200, 200, 200]
        assert rx.pending == 0
        assert (await c.post("/v1/traces", content=protobuf("after"), headers=PB)).status_code == 200
    assert await store.thread_keys() == ["otlp:after", "otlp:held-0", "otlp:held-1", "otlp:held-2"]


def test_the_new_reject_reasons_are_primed_for_metrics() -> None:
    telemetry = Telemetry()
    OtlpReceiver(None, ReceiverSettings(), telemetry=telemetry)  # type: ignore[arg-type]
    assert {"sinks_behind", "overloaded"} <= set(REJECT_REASONS)
    for reason in ("sinks_behind", "overloaded"):
        assert telemetry.registry.get_sample_value("tracing_eval_receiver_rejects_total", {"reason": reason}) == 0


# -- end to end: the OpenTelemetry SDK exporter against a running receiver ---------------------------------


class _Server(uvicorn.Server):
    """uvicorn without signal handling: the test stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
async def test_the_sdk_exporter_retries_through_429_and_no_span_is_lost(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await fill_outbox(store, "webhook", 5)
    telemetry = Telemetry()
    settings = ReceiverSettings(max_outbox_backlog=5, retry_after_seconds=2)
    rx = OtlpReceiver(store, settings, telemetry=telemetry, sinks=["webhook"])
    sock = http_server.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(http_server.http_app(rx.routes()), log_level="warning", lifespan="off", access_log=False)
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    # the exporter's own deadline is generous, so it keeps retrying as long as the receiver asks it to
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=LIVENESS_SECONDS)
    spans = turn("e2e-conv")
    try:
        await eventually(lambda: server.started, "uvicorn started")
        with caplog.at_level(logging.WARNING, logger="opentelemetry"):
            exporting = asyncio.create_task(asyncio.to_thread(exporter.export, spans))
            await eventually(lambda: rx.counters.rejected.get("sinks_behind", 0) >= 1, "the first 429")
            assert not exporting.done()  # the exporter waits for Retry-After, then tries again
            assert await stored_spans(store) == 0

            sink = AcceptingSink("webhook")  # the sink catches up: the outbox drains
            stats = await deliver_outbox(store, [sink], time.time(), max_attempts=10)  # type: ignore[list-item]
            assert stats.delivered == 5 and await store.outbox_stats(time.time()) == {}

            result = await asyncio.wait_for(exporting, LIVENESS_SECONDS)
        assert result is SpanExportResult.SUCCESS
        retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
        assert retries and all(m.endswith("retrying in 2.00s.") for m in retries), retries  # Retry-After honoured
        [trace] = await store.load_traces("otlp:e2e-conv")
        assert sorted(s.span_id for s in trace) == sorted(f"{s.context.span_id:016x}" for s in spans)
        assert rx.counters.spans == len(spans)
        rejects = rx.counters.rejected["sinks_behind"]
        assert rejects == len(retries)
        assert telemetry.registry.get_sample_value(
            "tracing_eval_receiver_rejects_total", {"reason": "sinks_behind"}
        ) == float(rejects)
    finally:
        exporter.shutdown()
        server.should_exit = True
        await asyncio.wait_for(serving, LIVENESS_SECONDS)
