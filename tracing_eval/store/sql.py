"""The state store on SQLAlchemy's async engine: SQLite by default, PostgreSQL for N replicas.

Written against SQLAlchemy Core with the dialect's own `INSERT ... ON CONFLICT`. On PostgreSQL
(`postgresql+asyncpg://...`) claims of threads and of outbox rows use `FOR UPDATE SKIP LOCKED` with
a lease, and schema creation is serialised by an advisory lock, so replicas can start together.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from itertools import groupby
from typing import Any

import orjson
import pydantic_core
from sqlalchemy import and_, delete, event, func, literal, literal_column, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from tracing_eval.assemble import part_is_current
from tracing_eval.delivery import FORMAT, RetractDelivery, result_payload
from tracing_eval.extras import missing_extra_message
from tracing_eval.identity import is_sampled, thread_key
from tracing_eval.model import MetricResult, Span, SpanEvent
from tracing_eval.store import history
from tracing_eval.store import schema as t
from tracing_eval.store.base import (
    Claim,
    Evaluated,
    IngestBatch,
    IngestRefused,
    IngestStats,
    Mode,
    OutboxRow,
    Outgoing,
    Readiness,
    ReviewItem,
    ReviewRequest,
    StoredResult,
    StoredThread,
)

_CHUNK = 500  # keeps IN (...) lists under SQLite's variable limit
#: the oldest SQLite the store's statements run on (RETURNING)
SQLITE_MIN = (3, 35, 0)
#: Columns of the ingest's bulk inserts, in the order of their rows' values.
_SPAN_COLUMNS = ("trace_id", "span_id", "data", "received_at")
_MESSAGE_COLUMNS = ("thread_key", "id", "parent", "data")
_TRACE_COLUMNS = ("trace_id", "thread_key", "conversation_id", "start_ns", "last_received_at", "revision", "pruned")
_THREAD_COLUMNS = (
    "key",
    "source",
    "conversation_id",
    "version",
    "turns_evaluated_version",
    "evaluated_version",
    "first_seen_at",
    "last_activity_at",
    "sampled",
    "status",
    "attempts",
    "next_eligible_at",
)
#: ... and of the bulk writes that record evaluations (every column given: no defaults to fill in).
_RESULT_COLUMNS = ("id", "thread_key", "target", "metric", "thread_version", "digest", "data", "updated_at")
_OUTBOX_COLUMNS = ("sink", "kind", "ref", "digest", "payload", "created_at", "attempts", "next_attempt_at", "failed")
_TURN_COLUMNS = ("trace_id", "revision", "data")

#: PostgreSQL connections per replica: each store call holds one for a single short transaction
#: (never across a judge call), so a small pool serves judge.max_concurrency evaluations; N replicas
#: need N * (pool_size + max_overflow) below the server's max_connections (100 by default).
_PG_POOL = {"pool_size": 5, "max_overflow": 5, "pool_timeout": 30, "pool_pre_ping": True, "pool_recycle": 1800}
_PG_CONNECT_TIMEOUT = 10.0  # seconds; asyncpg waits 60 by default before an unreachable host is an error
#: Key of the advisory lock that serialises schema creation and the version check across replicas.
_SCHEMA_LOCK = int.from_bytes(b"tr-eval\x01", "big")
#: How long outbox rows taken by one replica stay hidden from the others by default (PostgreSQL; a
#: replica that dies mid-delivery leaves them to the others after this long): `[sinks] lease_seconds`.
OUTBOX_LEASE_SECONDS = 300.0


class StoreError(RuntimeError):
    """The store cannot be used as configured (wrong schema version, unreachable database)."""


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


#: SQLSTATE classes of errors caused by the data itself: cardinality (21), data (22), integrity (23)
#: and program limits such as an index row too large (54). The same rows fail again on every retry.
_DATA_SQLSTATES = ("21", "22", "23", "54")


def refused_by_data(exc: BaseException) -> str | None:
    """What was wrong when `exc` is the database refusing the data itself (never retried), else None
    (the store is unavailable, busy or broken: retry later). The text has no SQL and no parameters."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    state = str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")
    if not (isinstance(exc, DataError | IntegrityError | OverflowError | UnicodeError) or state[:2] in _DATA_SQLSTATES):
        return None
    first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return first[:300]


def _engine_options(url: str) -> dict[str, Any]:
    """Pool and connect settings per database; SQLite keeps SQLAlchemy's defaults. SQL parameters
    (span data, conversation ids) never appear in error messages or logs."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return {"hide_parameters": True}
    connect: dict[str, Any] = {}
    if parsed.get_driver_name() == "asyncpg":  # `?timeout=N` in the URL sets it (asyncpg wants a number)
        connect["timeout"] = float(str(parsed.query.get("timeout", _PG_CONNECT_TIMEOUT)))
        connect["server_settings"] = {"application_name": "tracing-eval"}
    return {**_PG_POOL, "connect_args": connect, "hide_parameters": True}


def _upgrade_from_1(conn: Any) -> None:
    """Schema 1 -> 2: the new tables exist by now (`create_all`); traces get their revision and pruned
    flag, and older tables the indexes retention reads by. Spans stored by version 1 keep their
    histories inline, which reads back the same."""
    conn.exec_driver_sql("ALTER TABLE traces ADD COLUMN revision INTEGER NOT NULL DEFAULT 1")
    conn.exec_driver_sql("ALTER TABLE traces ADD COLUMN pruned BOOLEAN NOT NULL DEFAULT false")
    for table in t.metadata.tables.values():
        for index in table.indexes:
            if index.name in t.V2_INDEXES:
                index.create(conn, checkfirst=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # space freed by retention goes back to the file system in steps (`PRAGMA incremental_vacuum`);
    # takes effect in a new database only (an existing file keeps its mode until a full VACUUM)
    cur.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cur.execute("PRAGMA synchronous=FULL")  # a commit survives power loss: a 200 means stored
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _safe_error(url: str, exc: Exception) -> str:
    """The error text, with any password in the URL hidden."""
    text = f"{type(exc).__name__}: {exc}"
    try:
        password = make_url(url).password
    except Exception:
        password = None
    return text.replace(str(password), "***") if password else text


def _prunable(th: Any) -> Any:
    """A thread whose spans retention may delete: evaluated at its last version, or never to be."""
    return or_(th.evaluated_version == th.version, th.sampled.is_(False))


#: How aiosqlite's per-connection worker threads are named (threading names a thread after its target).
_SQLITE_WORKER = "(_connection_worker_thread)"
#: Bound on waiting for them after a failed open: a liveness bound, they end in microseconds.
_SQLITE_WORKER_JOIN_SECONDS = 10.0
#: The same after one failed connect while the store runs: a connection another task opened at that
#: moment would also be waited for, so a short bound (the thread of the failed one ends in microseconds)
_SQLITE_FAILED_CONNECT_JOIN_SECONDS = 1.0


def _sqlite_connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
    """SQLAlchemy's `do_connect` for SQLite: the driver's connect, and after a failed one a wait for the
    worker thread it started (see `_join_sqlite_workers`), so a store that vanished while the worker
    runs leaves no thread to die once the event loop closes."""
    before = set(threading.enumerate())
    try:
        return dialect.connect(*cargs, **cparams)
    except Exception:
        await_only(_join_sqlite_workers(before, _SQLITE_FAILED_CONNECT_JOIN_SECONDS))
        raise


async def _join_sqlite_workers(before: set[threading.Thread], timeout: float = _SQLITE_WORKER_JOIN_SECONDS) -> None:
    """Wait for the aiosqlite worker threads started since `before` to end.

    A connection that failed to open stops its worker thread without waiting for it; the thread then
    reports back to the event loop. Were the loop closed first (a CLI exiting on the error, a test
    ending), the thread would die with "Event loop is closed". Waiting here, with the loop running,
    lets it finish cleanly. Threads of connections still open are never among them: the engine was
    disposed before this is called."""
    started = [t for t in set(threading.enumerate()) - before if t.name.endswith(_SQLITE_WORKER)]
    for thread in started:
        await asyncio.to_thread(thread.join, timeout)


class SqlStore:
    """`Store` over one SQLAlchemy async engine."""

    def __init__(self, url: str, *, sample_rate: float = 1.0, engine: AsyncEngine | None = None) -> None:
        self.url = url
        self.sample_rate = sample_rate
        try:
            self.engine = engine or create_async_engine(url, **_engine_options(url))
        except Exception as exc:  # a malformed URL or a missing driver: say which, without the password
            extra = missing_extra_message(exc) if isinstance(exc, ModuleNotFoundError) else None
            raise StoreError(f"store.url is not usable: {extra or _safe_error(url, exc)}") from None
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
            event.listen(self.engine.sync_engine, "do_connect", _sqlite_connect)
        self._insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        self._known = history.KnownNodes()
        self._chains = history.Chains()
        self._compiled: dict[str, str] = {}  # SQL of the bulk inserts by name (`_executemany`)

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the schema if missing and check its version."""
        if self.dialect == "sqlite" and sqlite3.sqlite_version_info < SQLITE_MIN:
            raise StoreError(
                f"SQLite {sqlite3.sqlite_version} is too old for the store: it needs {'.'.join(map(str, SQLITE_MIN))} "
                "or newer (UPDATE ... FROM, RETURNING). Use a Python built with a newer SQLite, or PostgreSQL."
            )
        threads_before = set(threading.enumerate())
        try:
            async with self.engine.begin() as conn:
                if self.dialect == "postgresql":  # replicas starting together: one creates, the others wait
                    await conn.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
                await conn.run_sync(t.metadata.create_all)
                row = (await conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version"))).first()
                if row is None:
                    await conn.execute(t.meta.insert().values(key="schema_version", value=str(t.SCHEMA_VERSION)))
                elif int(row[0]) == 1:
                    await conn.run_sync(_upgrade_from_1)
                    await conn.execute(
                        update(t.meta).where(t.meta.c.key == "schema_version").values(value=str(t.SCHEMA_VERSION))
                    )
                elif int(row[0]) != t.SCHEMA_VERSION:
                    raise StoreError(
                        f"store at {make_url(self.url).render_as_string(hide_password=True)} has schema version {row[0]}; "
                        f"this tracing-eval expects {t.SCHEMA_VERSION}. Point store.url at a new database or upgrade."
                    )
        except StoreError:
            await self.engine.dispose()  # no pooled connection outlives a failed open
            await _join_sqlite_workers(threads_before)
            raise
        except Exception as exc:  # driver errors differ per database; say what and where
            await self.engine.dispose()
            await _join_sqlite_workers(threads_before)
            raise StoreError(
                f"cannot open the store at {make_url(self.url).render_as_string(hide_password=True)}: "
                f"{str(exc) or type(exc).__name__}"  # a connect timeout has no message of its own
            ) from exc

    async def close(self) -> None:
        await self.engine.dispose()

    # -- ingest ----------------------------------------------------------------------------

    async def ingest(self, batch: IngestBatch, now: float) -> IngestStats:
        """Store spans and events durably and bump the version of every thread they change.

        A span or event stored before with the same content changes nothing: an exporter that resends
        a batch whose acknowledgement it lost, or a source that pulls an overlap again, does not make
        its threads due for another evaluation. A span sent twice in one batch is stored once (the last
        copy). Raises `IngestRefused` when the database refuses the data itself (see `refused_by_data`)."""
        try:
            return await self._ingest(batch, now)
        except Exception as exc:
            detail = refused_by_data(exc)
            if detail is None:
                raise
            raise IngestRefused(detail) from None

    async def _ingest(self, batch: IngestBatch, now: float) -> IngestStats:
        stats = IngestStats()
        changed: set[str] = set()  # traces with a new or different span or a new event
        spans = sorted(  # in key order: concurrent ingests on PostgreSQL lock rows in one order, no deadlock
            {(s.trace_id, s.span_id): s for s in batch.spans}.values(), key=lambda s: (s.trace_id, s.span_id)
        )
        async with self.engine.begin() as conn:
            existing = await self._traces(conn, {s.trace_id for s in spans} | {e[0] for e in batch.events})
            keys = {tid: row.thread_key for tid, row in existing.items()}
            for s in spans:  # a trace's thread: the conversation it was stored in, else the one it names
                if s.trace_id not in existing and s.trace_id not in keys:
                    keys[s.trace_id] = thread_key(batch.source, batch.conversations.get(s.trace_id), s.trace_id)
                elif s.trace_id in existing and not existing[s.trace_id].conversation_id:
                    conv = batch.conversations.get(s.trace_id)
                    keys[s.trace_id] = thread_key(batch.source, conv, s.trace_id) if conv else keys[s.trace_id]
            nodes: dict[str, history.Nodes] = defaultdict(dict)  # per thread: nodes not stored in it before
            stored = {key: self._known.known(key, now) for key in set(keys.values())}
            if spans:
                # histories are split oldest first, so each tends to extend the last one of its slot
                # (`history.Chains`: only its new messages are parsed and hashed); a record does not
                # depend on the order
                records: dict[tuple[str, str], bytes] = {}
                for s in sorted(spans, key=lambda s: s.start_ns):
                    key = keys[s.trace_id]
                    records[s.trace_id, s.span_id] = history.span_record(s, nodes[key], self._chains, key, stored[key])
                span_rows = [(s.trace_id, s.span_id, records[s.trace_id, s.span_id], now) for s in spans]
                # a trace not stored before has no spans yet: each of its spans changes it, so they are
                # written in a plain executemany; spans of stored traces say whether they changed. On
                # PostgreSQL the runs go in key order (the rows' lock order, see above).
                runs = (
                    [(k, list(g)) for k, g in groupby(span_rows, lambda r: r[0] in existing)]
                    if self.dialect == "postgresql"
                    else [(False, [r for r in span_rows if r[0] not in existing])]
                    + [(True, [r for r in span_rows if r[0] in existing])]
                )
                for stored_before, run in runs:
                    if not run:
                        continue
                    if not stored_before:
                        await self._executemany(conn, "spans", self._span_upsert, _SPAN_COLUMNS, run)
                        changed.update(r[0] for r in run)
                        continue
                    for chunk in _chunks([dict(zip(_SPAN_COLUMNS, r, strict=True)) for r in run]):
                        changed.update((await conn.execute(self._span_returning, list(chunk))).scalars())
                stats.spans = len(span_rows)
            if batch.events:
                rows = []
                for trace_id, span_id, ev in batch.events:  # a repeated event has one digest: stored once
                    key = keys.get(trace_id)  # histories of events of a trace not stored yet stay inline
                    data = (
                        history.event_record(ev, nodes[key], self._chains, key, stored[key])
                        if key
                        else orjson.dumps(ev.model_dump())
                    )
                    rows.append(
                        {
                            "trace_id": trace_id,
                            "span_id": span_id,
                            "digest": _digest(data),
                            "data": data,
                            "received_at": now,
                        }
                    )
                rows = sorted(
                    {(r["trace_id"], r["span_id"], r["digest"]): r for r in rows}.values(),
                    key=lambda r: (r["trace_id"], r["span_id"], r["digest"]),
                )
                insert = self._insert(t.span_events).on_conflict_do_nothing().returning(t.span_events.c.trace_id)
                for chunk in _chunks(rows):
                    changed.update((await conn.execute(insert, list(chunk))).scalars())
                stats.events = len(rows)
            await self._store_nodes(conn, nodes)
            touched = await self._touch_threads(conn, batch, existing, keys, changed, now)
            stats.threads_changed = len(touched)
            for name, value in batch.source_state.items():
                ins = self._insert(t.source_state).values(name=name, value=value)
                await conn.execute(
                    ins.on_conflict_do_update(index_elements=[t.source_state.c.name], set_={"value": value})
                )
        for key in touched:  # committed: later spans of these threads need not send these nodes again
            if key in nodes:
                self._known.stored(key, nodes[key], now)
        return stats

    async def _traces(self, conn: AsyncConnection, trace_ids: Iterable[str]) -> dict[str, Any]:
        """The stored rows of these traces, by trace id."""
        found: dict[str, Any] = {}
        for chunk in _chunks(sorted(trace_ids)):
            res = await conn.execute(select(t.traces).where(t.traces.c.trace_id.in_(chunk)))
            found.update({r.trace_id: r for r in res})
        return found

    async def _store_nodes(self, conn: AsyncConnection, nodes: dict[str, history.Nodes]) -> None:
        """Insert the history nodes of an ingest (`history.span_record` leaves out those this process
        stored in their thread moments ago)."""
        rows = [
            (key, node_id, parent, data)
            for key, found in sorted(nodes.items())
            for node_id, (parent, data) in sorted(found.items())
        ]
        if rows:
            await self._executemany(
                conn, "messages", lambda: self._insert(t.messages).on_conflict_do_nothing(), _MESSAGE_COLUMNS, rows
            )

    @cached_property
    def _span_returning(self) -> Any:
        """`_span_upsert` returning the trace of each span it wrote."""
        return self._span_upsert().returning(t.spans.c.trace_id)

    def _span_upsert(self) -> Any:
        """Insert a span, or replace the stored one when its data differs."""
        ins = self._insert(t.spans)
        return ins.on_conflict_do_update(
            index_elements=[t.spans.c.trace_id, t.spans.c.span_id],
            set_={"data": ins.excluded.data, "received_at": ins.excluded.received_at},
            where=t.spans.c.data != ins.excluded.data,
        )

    def _trace_upsert(self) -> Any:
        ins = self._insert(t.traces)
        return ins.on_conflict_do_update(
            index_elements=[t.traces.c.trace_id],
            set_={
                "thread_key": ins.excluded.thread_key,
                "conversation_id": ins.excluded.conversation_id,
                "start_ns": ins.excluded.start_ns,
                "last_received_at": ins.excluded.last_received_at,
                "revision": t.traces.c.revision + literal_column("1"),  # literals: no parameter
            },
        )

    def _thread_upsert(self) -> Any:
        ins = self._insert(t.threads)
        return ins.on_conflict_do_update(
            index_elements=[t.threads.c.key],
            set_={
                "version": t.threads.c.version + literal_column("1"),
                "last_activity_at": ins.excluded.last_activity_at,
                "conversation_id": func.coalesce(t.threads.c.conversation_id, ins.excluded.conversation_id),
                "status": literal_column("'active'"),
                "attempts": literal_column("0"),
                "next_eligible_at": literal_column("0.0"),
            },
        )

    async def _executemany(
        self,
        conn: AsyncConnection,
        name: str,
        build: Callable[[], Any],
        columns: tuple[str, ...],
        rows: list[tuple[Any, ...]],
    ) -> None:
        """The statement `build` makes, once per row (values of `columns`, in that order), in one
        executemany of the driver, without SQLAlchemy's handling of each row: for the bulk inserts of
        plain values. The statement is built and compiled once per store and name (building an upsert
        costs more than running it on a small batch)."""
        sql = self._compiled.get(name)
        if sql is None:
            compiled = build().compile(dialect=self.engine.dialect, column_keys=list(columns))
            assert tuple(compiled.positiontup or ()) == columns, compiled.positiontup
            sql = self._compiled[name] = str(compiled)
        await conn.exec_driver_sql(sql, rows)

    async def _touch_threads(
        self,
        conn: AsyncConnection,
        batch: IngestBatch,
        existing: dict[str, Any],
        keys: dict[str, str],
        changed: set[str],
        now: float,
    ) -> set[str]:
        """Record the traces in `changed` and bump their threads' versions; returns those threads."""
        starts: dict[str, int] = {}
        for s in batch.spans:
            if s.trace_id not in changed:
                continue
            cur = starts.get(s.trace_id)
            if cur is None or (s.start_ns and (not cur or s.start_ns < cur)):
                starts[s.trace_id] = s.start_ns
        trace_rows: list[tuple[Any, ...]] = []
        touched: dict[str, str | None] = {}
        moved: dict[str, str] = {}  # thread a trace left -> thread it joined
        for tid in starts:
            old = existing.get(tid)
            conv = (old.conversation_id if old is not None else None) or batch.conversations.get(tid)
            key = keys[tid]
            if old is not None and old.thread_key != key:
                moved[old.thread_key] = key
            start = min((x for x in (starts[tid], old.start_ns if old is not None else 0) if x), default=0)
            trace_rows.append((tid, key, conv, start, now, 1, False))
            touched[key] = conv
        for tid in sorted({tid for tid, _, _ in batch.events if tid in changed} - starts.keys()):
            if tid in existing:  # events for spans stored earlier change those threads too
                row = existing[tid]
                touched.setdefault(row.thread_key, row.conversation_id)
                trace_rows.append((tid, row.thread_key, row.conversation_id, row.start_ns, now, 1, False))
        if trace_rows:
            trace_rows.sort(key=lambda r: r[0])  # one lock order across concurrent ingests
            await self._executemany(conn, "traces", self._trace_upsert, _TRACE_COLUMNS, trace_rows)
        if touched:
            rows = [
                (key, batch.source, conv, 1, 0, 0, now, now, is_sampled(key, self.sample_rate), "active", 0, 0.0)
                for key, conv in sorted(touched.items())
            ]
            await self._executemany(conn, "threads", self._thread_upsert, _THREAD_COLUMNS, rows)
        for key, into in sorted(moved.items()):  # a trace joined its conversation: its histories go along
            await self._copy_nodes(conn, key, into)
            if key in touched:
                continue
            still_used = (
                await conn.execute(select(func.count()).select_from(t.traces).where(t.traces.c.thread_key == key))
            ).scalar()
            if not still_used:  # ... and the stand-alone thread is dropped
                await conn.execute(delete(t.threads).where(t.threads.c.key == key))
                await conn.execute(delete(t.messages).where(t.messages.c.thread_key == key))
                self._known.forget(key)
                await self._supersede(conn, key, into, now)
        return set(touched)

    async def _copy_nodes(self, conn: AsyncConnection, from_key: str, to_key: str) -> None:
        """Copy a thread's history nodes into another (a trace moved; its stored spans refer to them)."""
        ms = t.messages.c
        copied = select(literal(to_key), ms.id, ms.parent, ms.data).where(ms.thread_key == from_key)
        insert = self._insert(t.messages).from_select(["thread_key", "id", "parent", "data"], copied)
        await conn.execute(insert.on_conflict_do_nothing())

    async def _supersede(self, conn: AsyncConnection, key: str, into: str, now: float) -> None:
        """Thread `key` merged into `into`: its results leave `results`, deliveries of them not yet made
        are dropped, every sink that had them gets a `retract` row (due once any delivery of them in
        progress on another replica has had its lease), and its review items are superseded."""
        ob, rs = t.outbox.c, t.results.c
        ids = list((await conn.execute(select(rs.id, rs.metric, rs.target).where(rs.thread_key == key))).all())
        retract: dict[tuple[str, str], float] = {}
        about = {r.id: {"metric": r.metric, "target": r.target} for r in ids}
        for chunk in _chunks([r.id for r in ids]):
            rows = await conn.execute(
                select(ob.sink, ob.ref, ob.delivered_at, ob.next_attempt_at).where(
                    ob.kind == "result", ob.ref.in_(chunk)
                )
            )
            for sink, ref, delivered_at, next_attempt_at in rows:
                due = now if delivered_at is not None else max(now, next_attempt_at)
                retract[(sink, ref)] = max(due, retract.get((sink, ref), now))
            await conn.execute(
                delete(t.outbox).where(
                    ob.kind == "result", ob.ref.in_(chunk), ob.delivered_at.is_(None), ob.failed.is_(False)
                )
            )
            await conn.execute(delete(t.results).where(rs.id.in_(chunk)))
        if retract:
            await conn.execute(
                self._insert(t.outbox).on_conflict_do_nothing(),
                [
                    {
                        "sink": sink,
                        "kind": "retract",
                        "ref": ref,
                        "digest": "-",
                        "payload": RetractDelivery(
                            format=FORMAT, result_id=ref, thread_key=key, merged_into=into, **about[ref]
                        ).payload(),
                        "created_at": now,
                        "next_attempt_at": due,
                    }
                    for (sink, ref), due in sorted(retract.items())
                ],
            )
        rv = t.review_items.c
        versions = (await conn.execute(select(rv.thread_version).where(rv.thread_key == key))).scalars()
        refs = [f"{key}@{v}" for v in versions]
        await conn.execute(
            update(t.review_items)
            .where(rv.thread_key == key, rv.status.in_(("open", "forwarded")))
            .values(status="superseded", resolved_at=now, resolution=f"merged into {into}")
        )
        for chunk in _chunks(refs):
            await conn.execute(
                delete(t.outbox).where(
                    ob.kind == "review", ob.ref.in_(chunk), ob.delivered_at.is_(None), ob.failed.is_(False)
                )
            )

    async def get_source_state(self, name: str) -> str | None:
        async with self.engine.connect() as conn:
            return (await conn.execute(select(t.source_state.c.value).where(t.source_state.c.name == name))).scalar()

    # -- claims ----------------------------------------------------------------------------

    async def claim(self, owner: str, now: float, ready: Readiness, limit: int, lease_seconds: float) -> list[Claim]:
        """Lease up to `limit` ready threads; a thread is leased to one worker at a time."""
        th = t.threads.c
        thread_due = and_(th.evaluated_version < th.version, th.last_activity_at <= now - ready.thread_idle)
        turns_due = and_(th.turns_evaluated_version < th.version, th.last_activity_at <= now - ready.turn_settle)
        due = (
            select(th.key)
            .where(
                th.status == "active",
                th.sampled.is_(True),
                or_(th.lease_until.is_(None), th.lease_until < now),
                th.next_eligible_at <= now,
                or_(thread_due, turns_due),
            )
            .order_by(th.last_activity_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        stmt = (
            update(t.threads)
            .where(th.key.in_(due.scalar_subquery()))
            .values(lease_owner=owner, lease_until=now + lease_seconds, attempts=th.attempts + 1)
            .returning(th.key, th.version, th.evaluated_version, th.last_activity_at, th.attempts)
        )
        async with self.engine.begin() as conn:
            rows = (await conn.execute(stmt)).all()
        claims = []
        for r in rows:
            idle = r.evaluated_version < r.version and r.last_activity_at <= now - ready.thread_idle
            claims.append(Claim(r.key, r.version, Mode.THREAD if idle else Mode.TURNS, owner, r.attempts))
        return sorted(claims, key=lambda c: c.thread_key)

    async def load_traces(self, thread_key: str) -> list[list[Span]]:
        """The thread's spans grouped by trace, with log events merged into their spans (traces whose
        spans retention deleted are absent; `load_thread` has their stored turns)."""
        async with self.engine.connect() as conn:
            trace_ids = list(
                (await conn.execute(select(t.traces.c.trace_id).where(t.traces.c.thread_key == thread_key))).scalars()
            )
            by_trace = await self._spans(conn, {thread_key: trace_ids})
        return [by_trace[tid] for tid in trace_ids if tid in by_trace]

    async def load_thread(self, thread_key: str) -> StoredThread:
        """What the thread's traces contribute: the stored part of every trace unchanged since it was
        assembled (and of every trace whose spans were deleted), and the spans of the others (a part
        stored by an earlier version that lacks a field counts as changed: `assemble.part_is_current`)."""
        return (await self.load_threads([thread_key]))[thread_key]

    async def load_threads(self, thread_keys: Sequence[str]) -> dict[str, StoredThread]:
        """`load_thread` for several threads, in a few queries for all of them."""
        tr, tu = t.traces.c, t.turns.c
        out = {key: StoredThread(key) for key in thread_keys}
        assemble: dict[str, list[str]] = defaultdict(list)  # thread -> traces to assemble
        async with self.engine.connect() as conn:
            for chunk in _chunks(list(out)):
                query = (
                    select(tr.thread_key, tr.trace_id, tr.revision, tr.pruned, tu.revision.label("part"), tu.data)
                    .select_from(t.traces.outerjoin(t.turns, tu.trace_id == tr.trace_id))
                    .where(tr.thread_key.in_(chunk))
                )
                for r in await conn.execute(query):
                    stored = out[r.thread_key]
                    if r.data is not None and (r.pruned or (r.part == r.revision and part_is_current(r.data))):
                        stored.parts[r.trace_id] = r.data
                    elif not r.pruned:
                        stored.revisions[r.trace_id] = r.revision
                        assemble[r.thread_key].append(r.trace_id)
            spans = await self._spans(conn, assemble)
        for key, trace_ids in assemble.items():
            out[key].traces = {tid: spans[tid] for tid in trace_ids if tid in spans}
        return out

    async def _spans(self, conn: AsyncConnection, traces: Mapping[str, list[str]]) -> dict[str, list[Span]]:
        """Spans of these traces (thread -> its trace ids), by trace id, histories and log events joined."""
        trace_ids = [tid for ids in traces.values() for tid in ids]
        raw: list[tuple[str, bytes]] = []
        raw_events: list[tuple[str, str, bytes]] = []
        for chunk in _chunks(trace_ids):
            query = select(t.spans.c.trace_id, t.spans.c.data).where(t.spans.c.trace_id.in_(chunk))
            raw += [(trace_id, data) for trace_id, data in await conn.execute(query)]
            events_query = select(t.span_events.c.trace_id, t.span_events.c.span_id, t.span_events.c.data)
            events_query = events_query.where(t.span_events.c.trace_id.in_(chunk))
            raw_events += [(trace_id, span_id, data) for trace_id, span_id, data in await conn.execute(events_query)]
        if not raw:
            return {}
        ms = t.messages.c
        nodes: dict[str, dict[str, tuple[str | None, bytes]]] = defaultdict(dict)
        for chunk in _chunks(list(traces)):
            nodes_query = select(ms.thread_key, ms.id, ms.parent, ms.data).where(ms.thread_key.in_(chunk))
            for key, node, parent, data in await conn.execute(nodes_query):
                nodes[key][node] = (parent, data)
        thread_of = {tid: key for key, ids in traces.items() for tid in ids}
        histories = {key: history.Histories(nodes[key]) for key in traces}
        by_trace: dict[str, list[Span]] = defaultdict(list)
        for trace_id, data in raw:
            by_trace[trace_id].append(history.read_span(data, histories[thread_of[trace_id]]))
        events: dict[tuple[str, str], list[SpanEvent]] = defaultdict(list)
        for trace_id, span_id, data in raw_events:
            events[(trace_id, span_id)].append(history.read_event(data, histories[thread_of[trace_id]]))
        for read in histories.values():
            read.joined()
        for spans in by_trace.values():
            for s in spans:
                extra = events.get((s.trace_id, s.span_id))
                if extra:
                    s.events = sorted([*s.events, *extra], key=lambda e: e.time_ns)
        return by_trace

    async def record(
        self,
        claim: Claim,
        outgoing: list[Outgoing],
        review: ReviewRequest | None,
        sinks: list[str],
        now: float,
    ) -> bool:
        """Store results, review item and outbox rows and release the lease, atomically.

        Returns False (and writes nothing) when the lease was lost to another worker.
        """
        return (await self.record_many([Evaluated(claim, outgoing, review)], sinks, now))[0]

    async def record_many(self, items: Sequence[Evaluated], sinks: list[str], now: float) -> list[bool]:
        """`record` for several evaluations in one transaction (one commit); each is written only if
        its claim still holds its lease (False in its place otherwise, and nothing of it is written)."""
        recorded: set[int] = set()
        parts: dict[str, tuple[int, bytes]] = {}
        async with self.engine.begin() as conn:
            order = sorted(range(len(items)), key=lambda i: items[i].claim.thread_key)  # one lock order
            released = await self._release_many(conn, [items[i].claim for i in order])
            for i in order:
                item, claim = items[i], items[i].claim
                if claim not in released:
                    continue
                recorded.add(i)
                if item.review is not None and item.review.reasons and claim.mode is Mode.THREAD:
                    await self._write_review(conn, claim, item.review, now)
                parts.update(item.parts)
            await self._write_results(conn, [(items[i].claim, items[i].outgoing) for i in sorted(recorded)], sinks, now)
            await self._write_parts(conn, parts)
        return [i in recorded for i in range(len(items))]

    async def _release_many(self, conn: AsyncConnection, claims: Sequence[Claim]) -> set[Claim]:
        """Release the lease of each claim that still holds it and mark its version evaluated (its
        turns; a thread claim the thread too), in one statement per chunk; returns those claims. On
        PostgreSQL the rows are locked in key order first, as ingest locks them."""
        by_key = {c.thread_key: c for c in claims}
        if len(by_key) != len(claims):
            raise ValueError("a batch holds two claims of one thread")
        released: set[Claim] = set()
        th = t.threads.c
        for chunk in _chunks(sorted(by_key), _CHUNK // 4):  # four parameters per claim
            if self.dialect != "sqlite":
                await conn.execute(select(th.key).where(th.key.in_(chunk)).order_by(th.key).with_for_update())
            params: dict[str, Any] = {}
            rows = []
            for n, key in enumerate(chunk):
                claim = by_key[key]
                params.update({f"k{n}": key, f"o{n}": claim.owner, f"v{n}": claim.version})
                params[f"m{n}"] = int(claim.mode is Mode.THREAD)
                rows.append(f"(:k{n}, :o{n}, CAST(:v{n} AS INTEGER), CAST(:m{n} AS INTEGER))")
            result = await conn.execute(text(self._release_sql().format(rows=", ".join(rows))), params)
            released.update(by_key[key] for key in result.scalars())
        return released

    def _release_sql(self) -> str:
        """`_release_many`'s statement with `{rows}` left for the claims' VALUES rows (key, owner,
        version, thread mode as 1 or 0)."""
        greatest = "max" if self.dialect == "sqlite" else "greatest"
        return (
            "WITH c(k, o, v, m) AS (VALUES {rows}) "
            "UPDATE threads SET lease_owner = NULL, lease_until = NULL, attempts = 0, last_error = NULL, "
            f"turns_evaluated_version = {greatest}(threads.turns_evaluated_version, c.v), "
            "evaluated_version = CASE WHEN c.m = 1 THEN c.v ELSE threads.evaluated_version END "
            "FROM c WHERE threads.key = c.k AND threads.lease_owner = c.o RETURNING threads.key"
        )

    async def _write_parts(self, conn: AsyncConnection, parts: dict[str, tuple[int, bytes]]) -> None:
        """Store the assembled part of each trace at its revision."""
        if not parts:
            return
        rows = [(tid, rev, data) for tid, (rev, data) in sorted(parts.items())]
        await self._executemany(conn, "turns", self._turn_upsert, _TURN_COLUMNS, rows)

    def _turn_upsert(self) -> Any:
        ins = self._insert(t.turns)
        return ins.on_conflict_do_update(
            index_elements=[t.turns.c.trace_id], set_={"revision": ins.excluded.revision, "data": ins.excluded.data}
        )

    async def _write_results(
        self, conn: AsyncConnection, recorded: list[tuple[Claim, list[Outgoing]]], sinks: list[str], now: float
    ) -> None:
        """Upsert the results of these claims; an outbox row per sink for each result that changed."""
        ids = [o.id for _, outgoing in recorded for o in outgoing]
        if not ids:
            return
        known: dict[str, str] = {}
        for chunk in _chunks(ids):
            res = await conn.execute(select(t.results.c.id, t.results.c.digest).where(t.results.c.id.in_(chunk)))
            known.update({r.id: r.digest for r in res})
        rows: list[tuple[Any, ...]] = []
        deliveries: list[tuple[Any, ...]] = []
        anchors: dict[int, bytes] = {}  # a thread's results share their anchors: each serialised once
        for claim, outgoing in recorded:
            for o in outgoing:
                data = pydantic_core.to_json(o.result)
                digest = _digest(o.result.model_dump_json(exclude={"duration_ms"}).encode())
                rows.append((o.id, claim.thread_key, o.target, o.result.metric, claim.version, digest, data, now))
                if known.get(o.id) == digest or not sinks:
                    continue  # unchanged: nothing new to deliver
                anchor_json = anchors.get(id(o.anchor))
                if anchor_json is None:
                    anchor_json = anchors[id(o.anchor)] = pydantic_core.to_json(o.anchor)
                payload = result_payload(o.id, claim.thread_key, claim.version, o.target, anchor_json, data)
                deliveries += [(s, "result", o.id, digest, payload, now, 0, 0.0, False) for s in sinks]
        rows.sort(key=lambda r: r[0])  # one lock order across replicas
        await self._executemany(conn, "results", self._result_upsert, _RESULT_COLUMNS, rows)
        if deliveries:
            await self._executemany(
                conn, "outbox", lambda: self._insert(t.outbox).on_conflict_do_nothing(), _OUTBOX_COLUMNS, deliveries
            )

    def _result_upsert(self) -> Any:
        ins = self._insert(t.results)
        return ins.on_conflict_do_update(
            index_elements=[t.results.c.id],
            set_={c: ins.excluded[c] for c in ("thread_version", "digest", "data", "updated_at", "target")},
        )

    async def _write_review(self, conn: AsyncConnection, claim: Claim, review: ReviewRequest, now: float) -> None:
        rv = t.review_items.c
        ins = (
            self._insert(t.review_items)
            .values(
                thread_key=claim.thread_key,
                thread_version=claim.version,
                status="open" if review.local else "forwarded",
                reasons=orjson.dumps(review.reasons),
                created_at=now,
            )
            .on_conflict_do_nothing()
            .returning(rv.id)
        )
        new_id = (await conn.execute(ins)).scalar()
        if new_id is None:
            return  # already routed for this version
        await conn.execute(
            update(t.review_items)
            .where(rv.thread_key == claim.thread_key, rv.status == "open", rv.id != new_id)
            .values(status="superseded", resolved_at=now, resolution=f"superseded by version {claim.version}")
        )
        if review.sinks:
            payload = review.delivery(new_id, claim.thread_key, claim.version).payload()
            await conn.execute(
                self._insert(t.outbox).on_conflict_do_nothing(),
                [
                    {
                        "sink": s,
                        "kind": "review",
                        "ref": f"{claim.thread_key}@{claim.version}",
                        "digest": "-",
                        "payload": payload,
                        "created_at": now,
                    }
                    for s in review.sinks
                ],
            )

    async def release(self, claim: Claim, error: str, now: float, retry_in: float, give_up: bool) -> None:
        """Give a claim back after a failure; it becomes eligible again after `retry_in`."""
        th = t.threads.c
        async with self.engine.begin() as conn:
            await conn.execute(
                update(t.threads)
                .where(th.key == claim.thread_key, th.lease_owner == claim.owner)
                .values(
                    lease_owner=None,
                    lease_until=None,
                    last_error=error[:2000],
                    next_eligible_at=now + retry_in,
                    status="failed" if give_up else "active",
                )
            )

    # -- reading results ---------------------------------------------------------------------

    async def results(self, thread_key: str | None = None) -> list[StoredResult]:
        q = select(t.results).order_by(t.results.c.thread_key, t.results.c.target, t.results.c.metric)
        if thread_key is not None:
            q = q.where(t.results.c.thread_key == thread_key)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [
            StoredResult(r.id, r.thread_key, r.target, r.thread_version, MetricResult.model_validate_json(r.data))
            for r in rows
        ]

    async def thread_keys(self) -> list[str]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(select(t.threads.c.key).order_by(t.threads.c.key))).scalars())

    async def thread_of_trace(self, trace_id: str) -> str | None:
        """The key of the thread a stored trace belongs to (None for an unknown trace)."""
        async with self.engine.connect() as conn:
            query = select(t.traces.c.thread_key).where(t.traces.c.trace_id == trace_id)
            return (await conn.execute(query)).scalar_one_or_none()

    async def thread_states(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            return [dict(r._mapping) for r in await conn.execute(select(t.threads).order_by(t.threads.c.key))]

    # -- outbox ----------------------------------------------------------------------------

    async def pending_outbox(
        self, sink: str, now: float, limit: int, lease_seconds: float = OUTBOX_LEASE_SECONDS
    ) -> list[OutboxRow]:
        """Rows due for `sink`. On PostgreSQL they are also leased (`next_attempt_at` moves
        `lease_seconds` ahead) so that N replicas delivering at once each send different rows;
        `outbox_done`/`outbox_retry` settle them, a replica that dies leaves them to the others."""
        ob = t.outbox.c
        taken = (ob.id, ob.sink, ob.kind, ob.ref, ob.payload, ob.attempts, ob.next_attempt_at)
        q = (
            select(*taken)
            .where(ob.sink == sink, ob.delivered_at.is_(None), ob.failed.is_(False), ob.next_attempt_at <= now)
            .order_by(ob.id)
            .limit(limit)
        )
        rows: Sequence[Any]
        if self.dialect == "postgresql":
            due = q.with_only_columns(ob.id).with_for_update(skip_locked=True)
            take = (
                update(t.outbox)
                .where(ob.id.in_(due.scalar_subquery()))
                .values(next_attempt_at=now + lease_seconds)
                .returning(*taken)
            )
            async with self.engine.begin() as conn:
                rows = sorted((await conn.execute(take)).all(), key=lambda r: r.id)
        else:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(q)).all()
        return [  # the row unpacked in `taken`'s order: cheaper than its attributes
            OutboxRow(row_id, row_sink, kind, ref, orjson.loads(payload), attempts, lease_until)
            for row_id, row_sink, kind, ref, payload, attempts, lease_until in rows
        ]

    async def renew_outbox(self, row: OutboxRow, now: float, lease_seconds: float) -> OutboxRow | None:
        """On PostgreSQL, the lease taken by `pending_outbox` is the fencing token: it is extended only
        if the row still carries it (SQLite: one sidecar, nothing to renew)."""
        return (await self.renew_outbox_many([row], now, lease_seconds))[0]

    async def renew_outbox_many(
        self, rows: Sequence[OutboxRow], now: float, lease_seconds: float
    ) -> list[OutboxRow | None]:
        """`renew_outbox` for the rows of a batch about to go out in one delivery, in one transaction:
        each row in its place, or None where another replica took the row over."""
        if self.dialect != "postgresql" or not rows:
            return list(rows)
        ob = t.outbox.c
        renewed: dict[int, float] = {}
        by_lease: dict[float, list[int]] = defaultdict(list)
        for row in rows:  # the rows of one `pending_outbox` call share their lease
            by_lease[row.lease_until].append(row.id)
        async with self.engine.begin() as conn:
            for lease, ids in sorted(by_lease.items()):
                renew = (
                    update(t.outbox)
                    .where(
                        ob.id.in_(sorted(ids)),
                        ob.next_attempt_at == lease,
                        ob.delivered_at.is_(None),
                        ob.failed.is_(False),
                    )
                    .values(next_attempt_at=now + lease_seconds)
                    .returning(ob.id, ob.next_attempt_at)
                )
                renewed.update({i: until for i, until in await conn.execute(renew)})
        return [replace(row, lease_until=renewed[row.id]) if row.id in renewed else None for row in rows]

    async def outbox_done(self, row_ids: Sequence[int], now: float) -> None:
        async with self.engine.begin() as conn:
            for chunk in _chunks(sorted(row_ids)):
                await conn.execute(
                    update(t.outbox)
                    .where(t.outbox.c.id.in_(chunk))
                    .values(delivered_at=now, attempts=t.outbox.c.attempts + 1)
                )

    async def outbox_retry(self, row_id: int, error: str, next_attempt_at: float, give_up: bool) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(t.outbox)
                .where(t.outbox.c.id == row_id)
                .values(
                    attempts=t.outbox.c.attempts + 1,
                    last_error=error[:2000],
                    next_attempt_at=next_attempt_at,
                    failed=give_up,
                )
            )

    async def outbox_backlog(self) -> int:
        ob = t.outbox.c
        async with self.engine.connect() as conn:
            q = select(func.count()).select_from(t.outbox).where(ob.delivered_at.is_(None), ob.failed.is_(False))
            return int((await conn.execute(q)).scalar() or 0)

    # -- review queue ----------------------------------------------------------------------

    @staticmethod
    def _review(r: Any) -> ReviewItem:
        return ReviewItem(
            r.id,
            r.thread_key,
            r.thread_version,
            r.status,
            orjson.loads(r.reasons),
            r.created_at,
            r.resolved_at,
            r.resolution,
        )

    async def review_items(self, status: str | None = "open") -> list[ReviewItem]:
        q = select(t.review_items).order_by(t.review_items.c.id)
        if status is not None:
            q = q.where(t.review_items.c.status == status)
        async with self.engine.connect() as conn:
            return [self._review(r) for r in await conn.execute(q)]

    async def review_item(self, item_id: int) -> ReviewItem | None:
        async with self.engine.connect() as conn:
            r = (await conn.execute(select(t.review_items).where(t.review_items.c.id == item_id))).first()
        return self._review(r) if r is not None else None

    async def resolve_review(self, item_id: int, resolution: str, now: float) -> bool:
        rv = t.review_items.c
        async with self.engine.begin() as conn:
            res = await conn.execute(
                update(t.review_items)
                .where(rv.id == item_id, rv.status == "open")
                .values(status="resolved", resolved_at=now, resolution=resolution)
            )
        return res.rowcount == 1

    # -- judge cache -----------------------------------------------------------------------

    async def cache_get(self, key: str) -> dict[str, Any] | None:
        """The cached judge answer under `key`, or None."""
        async with self.engine.connect() as conn:
            data = (await conn.execute(select(t.judge_cache.c.value).where(t.judge_cache.c.key == key))).scalar()
        return orjson.loads(data) if data is not None else None

    async def cache_put(self, key: str, value: dict[str, Any], now: float) -> None:
        """Store (or replace) the judge answer under `key`."""
        ins = self._insert(t.judge_cache).values(key=key, value=orjson.dumps(value), created_at=now)
        async with self.engine.begin() as conn:
            await conn.execute(
                ins.on_conflict_do_update(
                    index_elements=[t.judge_cache.c.key],
                    set_={"value": ins.excluded.value, "created_at": ins.excluded.created_at},
                )
            )

    # -- retention -------------------------------------------------------------------------

    async def prunable_threads(self, idle_before: float, limit: int) -> list[tuple[str, bool]]:
        """Threads whose spans may go: active, evaluated at their last version (or not sampled) and idle
        since before `idle_before`, oldest first; with whether any of their traces has no stored part
        for its current revision (to be assembled first, or its turn would be lost)."""
        th, tr, tu = t.threads.c, t.traces.c, t.turns.c
        unassembled = (
            select(tr.trace_id)
            .select_from(t.traces.outerjoin(t.turns, tu.trace_id == tr.trace_id))
            .where(
                tr.thread_key == th.key, tr.pruned.is_(False), or_(tu.revision.is_(None), tu.revision != tr.revision)
            )
            .exists()
        )
        query = (
            select(th.key, th.sampled, unassembled)
            .where(th.status == "active", th.last_activity_at < idle_before, _prunable(th))
            .order_by(th.last_activity_at)
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [(key, bool(sampled and missing)) for key, sampled, missing in await conn.execute(query)]

    async def prune_spans(
        self, keys: Sequence[str], parts: dict[str, tuple[int, bytes]], idle_before: float
    ) -> dict[str, int]:
        """Delete the spans, log events and histories of these threads, if still prunable (see
        `prunable_threads`), after storing `parts`; their traces are marked pruned and the threads
        `pruned` (a new span makes a thread active again). Returns rows deleted per table."""
        th, tr = t.threads.c, t.traces.c
        async with self.engine.begin() as conn:
            taken = update(t.threads).where(
                th.key.in_(sorted(keys)), th.status == "active", th.last_activity_at < idle_before, _prunable(th)
            )
            keys = list((await conn.execute(taken.values(status="pruned").returning(th.key))).scalars())
            if not keys:
                return {}
            await self._write_parts(conn, parts)
            traces = select(tr.trace_id).where(tr.thread_key.in_(keys))
            deleted = {
                "spans": (await conn.execute(delete(t.spans).where(t.spans.c.trace_id.in_(traces)))).rowcount,
                "events": (
                    await conn.execute(delete(t.span_events).where(t.span_events.c.trace_id.in_(traces)))
                ).rowcount,
                "messages": (await conn.execute(delete(t.messages).where(t.messages.c.thread_key.in_(keys)))).rowcount,
            }
            await conn.execute(
                update(t.traces).where(tr.thread_key.in_(keys), tr.pruned.is_(False)).values(pruned=True)
            )
        for key in keys:
            self._known.forget(key)
        return deleted

    async def expired_threads(self, idle_before: float, limit: int) -> list[str]:
        """Threads idle since before `idle_before`, oldest first (any status)."""
        th = t.threads.c
        query = select(th.key).where(th.last_activity_at < idle_before).order_by(th.last_activity_at).limit(limit)
        async with self.engine.connect() as conn:
            return list((await conn.execute(query)).scalars())

    async def delete_threads(self, keys: Sequence[str], idle_before: float) -> dict[str, int]:
        """Delete everything of these threads (if still idle since before `idle_before`): results, review
        items, turns, traces, spans, events, histories. Returns rows deleted per table."""
        th, tr = t.threads.c, t.traces.c
        async with self.engine.begin() as conn:
            gone = delete(t.threads).where(th.key.in_(sorted(keys)), th.last_activity_at < idle_before)
            keys = list((await conn.execute(gone.returning(th.key))).scalars())
            if not keys:
                return {}
            traces = select(tr.trace_id).where(tr.thread_key.in_(keys))
            deleted = {"threads": len(keys)}
            for name, table, column in (
                ("spans", t.spans, t.spans.c.trace_id),
                ("events", t.span_events, t.span_events.c.trace_id),
                ("turns", t.turns, t.turns.c.trace_id),
            ):
                deleted[name] = (await conn.execute(delete(table).where(column.in_(traces)))).rowcount
            for name, table, column in (
                ("traces", t.traces, tr.thread_key),
                ("messages", t.messages, t.messages.c.thread_key),
                ("results", t.results, t.results.c.thread_key),
                ("review_items", t.review_items, t.review_items.c.thread_key),
            ):
                deleted[name] = (await conn.execute(delete(table).where(column.in_(keys)))).rowcount
        for key in keys:
            self._known.forget(key)
        return deleted

    async def delete_old(self, what: str, before: float, limit: int) -> int:
        """Delete up to `limit` old rows of one kind; returns how many. `outbox`: delivered before
        `before`; `parked`: outbox rows given up, created before; `review_items`: resolved, superseded
        or forwarded before; `judge_cache`: answers stored before."""
        ob, rv, jc = t.outbox.c, t.review_items.c, t.judge_cache.c
        table, key, where = {
            "outbox": (t.outbox, ob.id, ob.delivered_at < before),
            "parked": (t.outbox, ob.id, and_(ob.failed.is_(True), ob.delivered_at.is_(None), ob.created_at < before)),
            "review_items": (
                t.review_items,
                rv.id,
                or_(
                    and_(rv.status.in_(("resolved", "superseded")), rv.resolved_at < before),
                    and_(rv.status == "forwarded", rv.created_at < before),
                ),
            ),
            "judge_cache": (t.judge_cache, jc.key, jc.created_at < before),
        }[what]
        async with self.engine.begin() as conn:
            batch = select(key).where(where).limit(limit).scalar_subquery()
            return int((await conn.execute(delete(table).where(key.in_(batch)))).rowcount or 0)

    async def reclaim(self, pages: int) -> int:
        """Give up to `pages` free pages back to the file system (SQLite incremental vacuum); returns how
        many went. PostgreSQL reuses the space of deleted rows itself (autovacuum): nothing to do."""
        if self.dialect != "sqlite":
            return 0
        async with self.engine.connect() as conn:
            before = (await conn.exec_driver_sql("PRAGMA freelist_count")).scalar() or 0
            await conn.commit()
            raw = await conn.get_raw_connection()
            # executescript steps the pragma to the end (execute would free one page per call)
            driver = raw.driver_connection
            assert driver is not None, "an open connection has a driver connection"
            await driver.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
            after = (await conn.exec_driver_sql("PRAGMA freelist_count")).scalar() or 0
        return max(0, int(before) - int(after))

    async def size(self) -> tuple[int, int | None]:
        """Bytes the store takes on disk, and of those how many are free for reuse (SQLite; None on
        PostgreSQL, where the database's size is the figure)."""
        async with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                page_size, pages, free = [
                    int((await conn.exec_driver_sql(f"PRAGMA {p}")).scalar() or 0)
                    for p in ("page_size", "page_count", "freelist_count")
                ]
                return page_size * pages, page_size * free
            return int((await conn.execute(select(func.pg_database_size(func.current_database())))).scalar() or 0), None

    async def maintenance_problems(self) -> list[str]:
        """What about the database will make a long-running store degrade, one sentence each (empty
        when nothing): on PostgreSQL, autovacuum off for the server or for one of the store's tables.
        Every outbox row is updated when taken and when delivered, and retention deletes in
        batches: without autovacuum those dead rows are never cleaned up, the store grows past
        what retention keeps and taking outbox rows slows down (benchmarks.md, section 9)."""
        if self.dialect != "postgresql":
            return []
        disabled = text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(:tables) AND EXISTS ("
            "SELECT 1 FROM unnest(c.reloptions) o WHERE lower(o) IN "
            "('autovacuum_enabled=false', 'autovacuum_enabled=off', 'autovacuum_enabled=no', 'autovacuum_enabled=0'))"
            " ORDER BY c.relname"
        )
        async with self.engine.connect() as conn:
            server = (await conn.execute(select(func.current_setting("autovacuum")))).scalar()
            tables = list((await conn.execute(disabled, {"tables": sorted(t.metadata.tables)})).scalars())
        why = "its dead rows (outbox deliveries, retention's deletes) are never cleaned up: the store keeps growing"
        problems = []
        if server == "off":
            problems.append(
                f"autovacuum is off on this PostgreSQL server: {why} and taking outbox rows slows down "
                "(turn it on: ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();)"
            )
        if tables:
            names = ", ".join(tables)
            problems.append(
                f"autovacuum is disabled for table(s) {names}: {why} "
                "(for each: ALTER TABLE <name> RESET (autovacuum_enabled);)"
            )
        return problems

    # -- operations (readiness and Prometheus gauges) ----------------------------------------

    async def ping(self) -> None:
        """Read the schema version: raises unless the store answers and holds this tracing-eval's schema."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version"))).first()
        if row is None:
            raise StoreError("the store has no schema version (was the database replaced?)")

    async def outbox_stats(self, now: float) -> dict[str, tuple[int, float]]:
        """Per sink: rows waiting for delivery (not delivered, not parked) and the age in seconds of
        the oldest of them. Sinks with nothing waiting are absent."""
        ob = t.outbox.c
        q = (
            select(ob.sink, func.count(), func.min(ob.created_at))
            .where(ob.delivered_at.is_(None), ob.failed.is_(False))
            .group_by(ob.sink)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return {sink: (int(n), max(0.0, now - float(oldest))) for sink, n, oldest in rows}

    async def threads_ready(self, now: float, ready: Readiness) -> dict[str, int]:
        """How many threads `claim` would take now, by the mode it would claim them in
        (`thread` when idle, else `turns`); leased threads are not counted."""
        th = t.threads.c
        thread_due = and_(th.evaluated_version < th.version, th.last_activity_at <= now - ready.thread_idle)
        turns_due = and_(th.turns_evaluated_version < th.version, th.last_activity_at <= now - ready.turn_settle)
        q = select(func.count().filter(thread_due), func.count().filter(and_(turns_due, ~thread_due))).where(
            th.status == "active",
            th.sampled.is_(True),
            th.last_activity_at <= now - min(ready.thread_idle, ready.turn_settle),  # the ready index's range
            or_(th.lease_until.is_(None), th.lease_until < now),
            th.next_eligible_at <= now,
            or_(thread_due, turns_due),
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(q)).one()
        return {Mode.THREAD.value: int(row[0] or 0), Mode.TURNS.value: int(row[1] or 0)}

    async def release_owned(self, owner: str) -> int:
        """Give back every lease `owner` holds (a draining worker); returns how many."""
        th = t.threads.c
        async with self.engine.begin() as conn:
            res = await conn.execute(
                update(t.threads).where(th.lease_owner == owner).values(lease_owner=None, lease_until=None)
            )
        return int(res.rowcount or 0)
