"""What the Langfuse end-to-end tests share: a worker (store, source, sink, pipeline) and checks.

`Worker` is one worker process against a `FakeLangfuseServer`; `restart()` builds new objects on
the same store file. `assert_scores_match` / `assert_routed_once` compare the fake's rows with the
results and review items in the store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from tests.support.fakes.langfuse_server import FakeLangfuseServer, SeedToolCall
from tracing_eval.config import Settings
from tracing_eval.connectors.langfuse import LangfuseSettings, LangfuseSink, LangfuseSource
from tracing_eval.connectors.langfuse.configs import score_name
from tracing_eval.connectors.langfuse.review import review_object
from tracing_eval.delivery import Delivery, parse
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import Status
from tracing_eval.pipeline import Pipeline
from tracing_eval.store import schema
from tracing_eval.store.base import StoredResult
from tracing_eval.store.sql import SqlStore

OK_TURNS = [
    ("Hi, can you check my order?", "Sure, what is the order number?", None, None),
    ("It is 4411.", "Order 4411 is packed and ships today.", [SeedToolCall("lookup_order", {"id": 4411}, {"status": "packed"})], None),
]  # fmt: skip
FAILING_TURNS = [
    ("My order number is 4411. Where is my order?", "Could you tell me your order number?", None, None),
    ("I already told you, it's 4411! This is useless.", "Could you tell me your order number?", None, None),
    ("Are you kidding me? 4411", "Could you tell me your order number?", None, None),
]
QUEUE = "tracing-eval review"


def lf_settings(server: FakeLangfuseServer, **overrides: Any) -> LangfuseSettings:
    return LangfuseSettings(
        base_url=server.base_url,
        public_key=server.public_key,
        secret_key=server.secret_key,
        **{"timeout_seconds": 5, "retry_backoff_seconds": 0.05, **overrides},
    )


@dataclass
class Worker:
    """One worker process: store, source, sink and pipeline; `restart()` builds new objects."""

    settings: Settings
    server: FakeLangfuseServer
    lf: LangfuseSettings
    judge: Any = None
    metrics: list[str] | None = None
    store: SqlStore = field(init=False)
    source: LangfuseSource = field(init=False)
    sink: LangfuseSink = field(init=False)
    pipeline: Pipeline = field(init=False)

    async def start(self, **source_kw: Any) -> Worker:
        self.store = SqlStore(self.settings.store.url)
        await self.store.open()
        self.source = LangfuseSource(self.lf, **source_kw)
        self.sink = LangfuseSink(self.lf)
        self.pipeline = Pipeline(
            store=self.store,
            settings=self.settings,
            metrics=build_metrics(self.settings, self.metrics),
            owner="test-worker",
            sources=[self.source],
            sinks=[self.sink],
            judge=self.judge,
        )
        return self

    async def stop(self) -> None:
        await self.source.aclose()
        await self.sink.aclose()
        await self.store.close()

    async def restart(self, **source_kw: Any) -> None:
        await self.stop()
        await self.start(**source_kw)

    async def settle(self, max_ticks: int = 40) -> None:
        """Tick until a tick pulled, evaluated and delivered without errors and nothing is pending."""
        for _ in range(max_ticks):
            stats = await self.pipeline.tick(settle_all=True)
            if not stats.errors and await self.store.outbox_backlog() == 0:
                return
            await asyncio.sleep(0.3)
        raise AssertionError("the worker did not settle")


async def outbox_deliveries(store: SqlStore, sink: str, kind: str | None = None) -> list[Delivery]:
    """Every outbox row of `sink` (delivered or not), as the outbox hands it to the sink."""
    ob = schema.outbox.c
    query = select(ob.id, ob.kind, ob.payload).where(ob.sink == sink).order_by(ob.id)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [parse(k, orjson.loads(p), i) for i, k, p in rows if kind is None or k == kind]


def ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


async def scored_results(store: SqlStore) -> list[StoredResult]:
    """Results the sink writes: status ok with a score."""
    return [r for r in await store.results() if r.result.status is Status.OK and r.result.score is not None]


async def assert_scores_match(store: SqlStore, server: FakeLangfuseServer) -> None:
    """Every ok result is exactly one score row with the right target, value, comment, config, time."""
    rows = server.scores
    counts = Counter(r.id for r in rows)
    assert [k for k, n in counts.items() if n > 1] == []
    by_id = {r.id: r for r in rows}
    expected = await scored_results(store)
    assert set(by_id) == {r.id for r in expected}
    configs = {c.id: c for c in server.score_configs}
    traces = {t.id: t for t in server.traces}
    for stored in expected:
        row, result = by_id[stored.id], stored.result
        kind, object_id = review_object(stored.thread_key)
        assert row.name == score_name(result.metric)
        assert row.config_id is not None and configs[row.config_id].name == row.name
        if stored.target == "thread" and kind == "TRACE":  # a thread without a session: its one trace
            assert (row.trace_id, row.observation_id, row.session_id) == (object_id, None, None)
            assert row.timestamp == ms(traces[object_id].timestamp)
        elif stored.target == "thread":
            session = object_id
            assert (row.session_id, row.trace_id, row.observation_id) == (session, None, None)
            first = min(t.timestamp for t in traces.values() if t.session_id == session)
            assert row.timestamp == ms(first)
        else:
            trace = traces[stored.target.removeprefix("trace:")]
            assert trace.root is not None
            assert (row.trace_id, row.observation_id, row.session_id) == (trace.id, trace.root.id, None)
            assert row.timestamp == ms(trace.timestamp)
        if configs[row.config_id].data_type == "CATEGORICAL":
            assert row.string_value == result.label
        assert row.value == pytest.approx(result.score)
        assert row.comment == (result.reason or None)
        assert row.metadata is not None and row.metadata["metric_version"] == result.metric_version
        assert row.metadata["evaluator"] == "tracing-eval" and row.metadata["status"] == "ok"


async def assert_routed_once(store: SqlStore, server: FakeLangfuseServer) -> None:
    """One queue item per routed thread, and one marker comment per routed version."""
    routed = await store.review_items(status=None)
    items = Counter((i.object_type, i.object_id) for i in server.queue_items)
    assert items == Counter(review_object(key) for key in {r.thread_key for r in routed})
    for item in routed:
        kind, object_id = review_object(item.thread_key)
        marker = f"tracing-eval review · thread {item.thread_key} · version {item.thread_version} ·"
        found = [
            c for c in server.comments if (c.object_type, c.object_id) == (kind, object_id) and marker in c.content
        ]
        assert len(found) == 1


def seed_standard(server: FakeLangfuseServer) -> None:
    server.seed_session("s-ok", OK_TURNS)
    server.seed_session("s-fail", FAILING_TURNS)
    server.seed_session("s-self", [("judge this", '{"verdict": "none"}', None, None)], tags=["tracing-eval"])


READS = {
    "GET /api/public/v2/observations": ("fromStartTime", "toStartTime"),
    "GET /api/public/traces": ("fromTimestamp", "toTimestamp"),
}


def assert_reads_bounded(server: FakeLangfuseServer) -> None:
    """Every list read (observations, traces) carried both time bounds."""
    reads = [r for r in server.requests if r.endpoint in READS]
    assert reads
    for r in reads:
        keys = {k for k, _ in r.query}
        assert set(READS[r.endpoint]) <= keys, f"unbounded read: {r.endpoint} {r.query}"
