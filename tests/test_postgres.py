"""The PostgreSQL store under concurrency: replicas claiming at once, lease expiry, outbox leases,
schema creation by replicas starting together and the schema version check.

Replicas are separate `SqlStore` objects (one engine and pool each), in separate processes where
it matters. Every test gets its own temporary database (tests/conftest.py); without PostgreSQL the
tests fail, they never skip.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import select, update

from tests.conftest import EXAMPLES, pg_database
from tests.support.pg_replicas import (
    CRASHED_LEASE,
    SETTLED,
    claim_then_die,
    conversations,
    evaluations,
    open_at_once,
    probe,
    replica,
    turn,
)
from tests.support.results import score_result
from tracing_eval.config import load_settings
from tracing_eval.delivery import Delivery, ResultDelivery
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import Scope
from tracing_eval.pipeline import Pipeline
from tracing_eval.sinks import BaseSink, deliver_outbox
from tracing_eval.store import schema
from tracing_eval.store.base import IngestBatch, Outgoing
from tracing_eval.store.sql import SqlStore, StoreError

#: The `store_url` (and `settings`) of a test marked so is a fresh PostgreSQL database.
on_pg = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

REPLICAS = 4
SPAWN = mp.get_context("spawn")  # fresh interpreters: no event loop or connection inherited

# -- tests ---------------------------------------------------------------------------------------


@on_pg
async def test_four_replicas_evaluate_each_ready_thread_version_once(store_url: str) -> None:
    store = SqlStore(store_url)
    await store.open()
    async with store.engine.begin() as conn:
        await conn.run_sync(probe.create_all)
    await store.ingest(conversations(range(300), 0), time.time())
    barrier, grown, out = SPAWN.Barrier(REPLICAS + 1), SPAWN.Event(), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=replica, args=(store_url, f"replica-{i}", barrier, grown, out)) for i in range(REPLICAS)
    ]
    for p in procs:
        p.start()
    try:
        await asyncio.to_thread(barrier.wait, 60)
        # while the replicas work, 100 threads grow a turn: they get a new version to evaluate
        for chunk in range(0, 100, 10):
            await store.ingest(conversations(range(chunk, chunk + 10), 1), time.time())
            await asyncio.sleep(0.01)
        grown.set()
        reports = [await asyncio.to_thread(out.get, True, 120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * REPLICAS

    assert not any(r["timeout"] for r in reports)
    assert [r["twice"] for r in reports] == [[]] * REPLICAS, "a thread version was evaluated twice"
    assert [r["not_mine"] for r in reports] == [[]] * REPLICAS, "a claim came back for a lease held by another"
    assert sum(r["lost"] for r in reports) == 0
    assert all(r["recorded"] > 0 for r in reports), f"some replica never got work: {reports}"
    async with store.engine.connect() as conn:
        done = (await conn.execute(select(evaluations))).all()
    states = {s["key"]: s for s in await store.thread_states()}
    assert len(states) == 300
    assert sum(r["recorded"] for r in reports) == len(done)
    assert all(d.finished is not None for d in done)
    per_version = Counter((d.thread_key, d.version) for d in done)
    assert max(per_version.values()) == 1
    # none missing: every thread's current version was evaluated, and its lease given back
    assert {k: (s["version"], s["evaluated_version"], s["lease_owner"]) for k, s in states.items()} == {
        k: (s["version"], s["version"], None) for k, s in states.items()
    }
    assert {(k, s["version"]) for k, s in states.items()} <= set(per_version)
    assert sum(s["version"] == 2 for s in states.values()) == 100
    # no two owners at once: the evaluations of one thread never overlap in time
    by_thread: dict[str, list[Any]] = {}
    for d in done:
        by_thread.setdefault(d.thread_key, []).append(d)
    for runs in by_thread.values():
        runs.sort(key=lambda d: d.started)
        assert all(a.finished <= b.started for a, b in zip(runs, runs[1:], strict=False))
    # the results table holds one row per thread, at the version evaluated last
    stored = await store.results()
    assert {r.thread_key: r.thread_version for r in stored} == {k: s["version"] for k, s in states.items()}
    assert len(await store.pending_outbox("hook", time.time(), 10_000)) == len(done)
    await store.close()


@on_pg
async def test_a_stalled_claimer_loses_its_lease_and_its_late_record_is_refused(store_url: str) -> None:
    slow, other = SqlStore(store_url), SqlStore(store_url)  # two replicas: two engines
    await slow.open()
    await other.open()
    try:
        t0 = time.time()  # the replicas' clock, moved on by hand: no waiting for a lease to run out
        await slow.ingest(conversations(range(3), 0), t0)
        stalled = await slow.claim("slow", t0, SETTLED, 10, 1.0)
        assert len(stalled) == 3
        assert await other.claim("other", t0 + 0.9, SETTLED, 10, 30) == []  # leased to the slow one
        later = t0 + 1.1  # the slow one's lease has run out
        taken = await other.claim("other", later, SETTLED, 10, 30)
        assert [c.thread_key for c in taken] == [c.thread_key for c in stalled]
        res = score_result("m", 1.0, threshold=0.5, scope=Scope.THREAD)
        for c in taken:
            assert await other.record(c, [Outgoing(f"r-{c.thread_key}", "thread", res)], None, ["hook"], later)
        late = score_result("m", 0.0, threshold=0.5, scope=Scope.THREAD)
        for c in stalled:  # the slow one wakes up: its results are refused, nothing of it is written
            assert not await slow.record(c, [Outgoing(f"r-{c.thread_key}", "thread", late)], None, ["hook"], later)
        assert [r.result.score for r in await other.results()] == [1.0] * 3
        assert len(await other.pending_outbox("hook", later, 100)) == 3
        assert {(s["evaluated_version"], s["lease_owner"]) for s in await other.thread_states()} == {(1, None)}
    finally:
        await slow.close()
        await other.close()


@on_pg
async def test_a_crashed_replica_leaves_its_threads_to_the_others_after_the_lease(store_url: str) -> None:
    store = SqlStore(store_url)
    await store.open()
    await store.ingest(conversations(range(2), 0), time.time())
    out = SPAWN.Queue()
    proc = SPAWN.Process(target=claim_then_die, args=(store_url, out))
    proc.start()
    claimed_at, claimed = await asyncio.to_thread(out.get, True, 60)
    await asyncio.to_thread(proc.join, 30)
    assert proc.exitcode == 1 and len(claimed) == 2
    # times on the clock the crashed replica claimed by, however long the machine took to get here
    assert await store.claim("survivor", claimed_at + CRASHED_LEASE - 0.1, SETTLED, 10, 30) == []
    after = claimed_at + CRASHED_LEASE + 0.1
    taken = await store.claim("survivor", after, SETTLED, 10, 30)
    assert sorted(c.thread_key for c in taken) == sorted(claimed)
    for c in taken:
        assert await store.record(c, [], None, [], after)
    assert {s["evaluated_version"] for s in await store.thread_states()} == {1}
    await store.close()


class CountingSink(BaseSink):
    name = "hook"

    def __init__(self, delivered: Counter[str]) -> None:
        self.delivered = delivered

    async def deliver(self, delivery: Delivery) -> None:
        await asyncio.sleep(0.001)
        assert isinstance(delivery, ResultDelivery)
        self.delivered[delivery.result_id] += 1


@on_pg
async def test_replicas_delivering_the_outbox_at_once_send_each_row_once(store_url: str) -> None:
    first = SqlStore(store_url)
    await first.open()
    await first.ingest(conversations(range(120), 0), time.time())
    for c in await first.claim("w", time.time(), SETTLED, 1000, 60):
        res = score_result("m", 1.0, threshold=0.5, scope=Scope.THREAD)
        await first.record(c, [Outgoing(f"r-{c.thread_key}", "thread", res)], None, ["hook"], time.time())
    replicas = [first] + [SqlStore(store_url) for _ in range(REPLICAS - 1)]
    for r in replicas[1:]:
        await r.open()
    delivered: Counter[str] = Counter()

    async def drain(store: SqlStore) -> int:
        sent = 0
        while True:
            stats = await deliver_outbox(store, [CountingSink(delivered)], time.time(), 5, limit=10)
            if not stats.delivered:
                return sent
            sent += stats.delivered

    per_replica = await asyncio.gather(*(drain(r) for r in replicas))
    assert sum(per_replica) == 120 and len(delivered) == 120 and set(delivered.values()) == {1}
    assert sum(1 for n in per_replica if n) > 1, per_replica  # the work was shared
    assert await first.outbox_backlog() == 0
    for r in replicas:
        await r.close()


@on_pg
async def test_outbox_rows_taken_by_a_replica_that_died_are_delivered_after_the_lease(store_url: str) -> None:
    store = SqlStore(store_url)
    await store.open()
    await store.ingest(conversations(range(1), 0), 1000.0)
    [c] = await store.claim("w", 1000.0, SETTLED, 10, 60)
    await store.record(
        c, [Outgoing("r1", "thread", score_result("m", 1.0, threshold=0.5, scope=Scope.THREAD))], None, ["hook"], 1000
    )
    assert len(await store.pending_outbox("hook", 1001.0, 10)) == 1  # taken, then the replica dies
    assert await store.pending_outbox("hook", 1002.0, 10) == []  # hidden from the others while leased
    assert len(await store.pending_outbox("hook", 1001.0 + 301, 10)) == 1
    await store.close()


@on_pg
async def test_a_batch_sink_renews_its_rows_together_and_skips_those_taken_over(store_url: str) -> None:
    """A batch of rows about to go to a batch sink has its leases renewed in one transaction: rows
    another replica took over since (its lease ran out) are left to that replica."""
    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
    t0 = time.time()
    await a.ingest(conversations(range(1), 0), t0)
    [c] = await a.claim("w", t0, SETTLED, 10, 60)
    results = [Outgoing(f"r{i}", f"trace:{i}", score_result("m", 1.0, threshold=0.5, scope=Scope.TURN, turn_index=i))
               for i in range(4)]  # fmt: skip
    await a.record(c, results, None, ["hook"], t0)
    mine = await a.pending_outbox("hook", t0, 2, lease_seconds=60)  # A takes two rows, then stalls
    theirs = await b.pending_outbox("hook", t0 + 60.01, 10, lease_seconds=60)  # B takes over all four
    assert len(mine) == 2 and len(theirs) == 4
    assert await a.renew_outbox_many(mine, t0 + 61, 60) == [None, None]  # A must not send them
    renewed = await b.renew_outbox_many(theirs, t0 + 61, 60)
    assert [r.id for r in renewed if r is not None] == [r.id for r in theirs]
    assert all(r is not None and r.lease_until == t0 + 121 for r in renewed)

    sent: list[list[str]] = []

    class BatchSink(BaseSink):
        name = "hook"
        batch = True

        async def deliver_batch(self, deliveries: Sequence[Delivery]) -> None:
            sent.append(sorted(d.result_id for d in deliveries if isinstance(d, ResultDelivery)))

    stats = await deliver_outbox(b, [BatchSink()], t0 + 200, 5, lease_seconds=60)  # B's leases ran out: due again
    assert sent == [["r0", "r1", "r2", "r3"]] and stats.delivered == 4 and stats.taken_over == 0
    assert await a.outbox_backlog() == 0
    for s in (a, b):
        await s.close()


@on_pg
async def test_a_batch_outliving_its_lease_leaves_the_rest_to_the_replica_that_took_it_over(store_url: str) -> None:
    """Replica A takes 5 rows with a 60 s lease and is slow: while it delivers the third (whose lease it
    renewed), B comes 60 s later (by its clock), takes the two A has not started and delivers them. A
    finishes the third and skips those two: every row is delivered once."""
    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
    t0 = time.time()
    await a.ingest(conversations(range(1), 0), t0)
    [c] = await a.claim("w", t0, SETTLED, 10, 60)
    results = [Outgoing(f"r{i}", f"trace:{i}", score_result("m", 1.0, threshold=0.5, scope=Scope.TURN, turn_index=i))
               for i in range(5)]  # fmt: skip
    await a.record(c, results, None, ["hook"], t0)
    delivered: Counter[str] = Counter()
    at_third, resume = asyncio.Event(), asyncio.Event()

    class SlowSink(CountingSink):
        async def deliver(self, delivery: Delivery) -> None:
            if isinstance(delivery, ResultDelivery) and delivery.result_id == "r2":
                at_third.set()
                await resume.wait()
            await asyncio.sleep(0.05)
            await super().deliver(delivery)

    first = asyncio.create_task(deliver_outbox(a, [SlowSink(delivered)], t0, 5, lease_seconds=60))
    await at_third.wait()
    second = await deliver_outbox(b, [CountingSink(delivered)], t0 + 60.01, 5, lease_seconds=60)
    resume.set()
    stats = await first
    assert (second.delivered, stats.delivered, stats.taken_over) == (2, 3, 2)
    assert delivered == Counter({f"r{i}": 1 for i in range(5)})
    assert await a.outbox_backlog() == 0
    for s in (a, b):
        await s.close()


async def test_replicas_starting_together_create_the_schema_once() -> None:
    with pg_database() as url:  # four processes released by one barrier into an empty database
        barrier, out = SPAWN.Barrier(REPLICAS), SPAWN.Queue()
        procs = [SPAWN.Process(target=open_at_once, args=(url, barrier, out)) for _ in range(REPLICAS)]
        for p in procs:
            p.start()
        outcomes = [await asyncio.to_thread(out.get, True, 60) for _ in procs]
        for p in procs:
            await asyncio.to_thread(p.join, 30)
        assert outcomes == ["ok"] * REPLICAS
    for _ in range(5):  # and, tighter, eight engines in one process, five times over
        with pg_database() as url:
            stores = [SqlStore(url) for _ in range(8)]
            outcomes = await asyncio.gather(*(s.open() for s in stores), return_exceptions=True)
            async with stores[0].engine.connect() as conn:
                versions = (await conn.execute(select(schema.meta.c.value))).scalars().all()
            for s in stores:
                await s.close()
            assert outcomes == [None] * 8
            assert versions == [str(schema.SCHEMA_VERSION)]


@on_pg
async def test_schema_version_mismatch_names_the_database_but_not_the_password(store_url: str) -> None:
    store = SqlStore(store_url)
    await store.open()
    async with store.engine.begin() as conn:
        await conn.execute(update(schema.meta).values(value="7"))
    await store.close()
    with_password = store_url.replace("postgres@", "postgres:s3cret@", 1)  # trust auth ignores it
    other = SqlStore(with_password)
    with pytest.raises(StoreError, match=f"schema version 7; this tracing-eval expects {schema.SCHEMA_VERSION}") as err:
        await other.open()
    assert "postgres:***@127.0.0.1" in str(err.value) and "s3cret" not in str(err.value)
    await other.close()


async def test_a_missing_database_is_a_clear_error() -> None:
    with pg_database() as url:
        missing = url.rsplit("/", 1)[0] + "/no_such_database_here"
    store = SqlStore(missing)
    with pytest.raises(StoreError, match="cannot open the store at postgresql") as err:
        await store.open()
    assert 'database "no_such_database_here" does not exist' in str(err.value)
    await store.close()


async def test_a_connect_timeout_is_named_in_the_error() -> None:
    """A server that accepts and never answers: asyncpg's TimeoutError has no message, so its name is said."""
    silent = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    store = SqlStore(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/test?timeout=0.2")
    with pytest.raises(StoreError) as err:
        await store.open()
    assert (
        str(err.value)
        == f"cannot open the store at postgresql+asyncpg://postgres@127.0.0.1:{port}/test?timeout=0.2: TimeoutError"
    )
    await store.close()
    silent.close()
    await silent.wait_closed()


@on_pg
async def test_four_pipelines_evaluate_the_examples_once(store_url: str, settings: Any) -> None:
    """The real pipeline, four replicas ticking at once over one database: every thread once."""
    from tracing_eval.connectors.otlp.file_source import OtlpFileSource

    feeder = SqlStore(store_url)
    await feeder.open()
    for name in ("otel-genai.otlp.jsonl", "openinference.otlp.jsonl"):
        await OtlpFileSource(EXAMPLES / name, complete=True).pull(feeder, time.time())
    settings = load_settings(None, store={"url": store_url}, schedule={"batch_size": 2})  # claims spread out
    stores = [SqlStore(store_url) for _ in range(REPLICAS)]
    for s in stores:
        await s.open()
    pipelines = [Pipeline(s, settings, build_metrics(settings), owner=f"replica-{i}") for i, s in enumerate(stores)]
    stats = await asyncio.gather(*(p.tick(settle_all=True) for p in pipelines))
    assert sum(s.threads_evaluated for s in stats) == 14
    assert sum(s.lost_leases + s.errors for s in stats) == 0
    assert sum(1 for s in stats if s.threads_evaluated) > 1, [s.threads_evaluated for s in stats]
    results = await feeder.results()
    assert len({r.thread_key for r in results}) == 14
    again = await asyncio.gather(*(p.tick(settle_all=True) for p in pipelines))
    assert sum(s.threads_evaluated for s in again) == 0
    for s in [feeder, *stores]:
        await s.close()


@on_pg
async def test_replicas_ingesting_the_same_spans_in_any_order_do_not_deadlock(store_url: str) -> None:
    """Receivers behind a load balancer get overlapping batches (exporter retries, shared traces):
    rows are written in key order, so concurrent ingests wait for each other but never deadlock."""
    stores = [SqlStore(store_url) for _ in range(REPLICAS)]
    for s in stores:
        await s.open()
    spans = [turn(n, k) for n in range(40) for k in range(3)]
    convs = {s.trace_id: f"conv-{int(s.trace_id[:8], 16)}" for s in spans}

    async def feed(store: SqlStore, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(15):
            batch = rng.sample(spans, 60)
            await store.ingest(IngestBatch(spans=batch, conversations=convs), time.time())

    await asyncio.gather(*(feed(s, i) for i, s in enumerate(stores)))
    states = await stores[0].thread_states()
    assert len(states) == 40 and len(await stores[0].load_traces("otlp:conv-0")) == 3
    for s in stores:
        await s.close()
