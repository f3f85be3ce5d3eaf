"""The state store on SQLAlchemy's async engine: SQLite by default, PostgreSQL for N replicas.

Written against SQLAlchemy Core with the dialect's own `INSERT ... ON CONFLICT`. On PostgreSQL
(`postgresql+asyncpg://...`) claims of threads and of outbox rows use `FOR UPDATE SKIP LOCKED` with
a lease, and schema creation is serialised by an advisory lock, so replicas can start together.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import orjson
import pydantic_core
from sqlalchemy import and_, delete, event, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from tracing_eval.identity import is_sampled, thread_key
from tracing_eval.model import MetricResult, Span, SpanEvent
from tracing_eval.store import schema as t
from tracing_eval.store.base import (
    Claim,
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
)

_CHUNK = 500  # keeps IN (...) lists under SQLite's variable limit

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


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
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


class SqlStore:
    """`Store` over one SQLAlchemy async engine."""

    def __init__(self, url: str, *, sample_rate: float = 1.0, engine: AsyncEngine | None = None) -> None:
        self.url = url
        self.sample_rate = sample_rate
        try:
            self.engine = engine or create_async_engine(url, **_engine_options(url))
        except Exception as exc:  # a malformed URL or a missing driver: say which, without the password
            raise StoreError(f"store.url is not usable: {_safe_error(url, exc)}") from None
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self._insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the schema if missing and check its version."""
        try:
            async with self.engine.begin() as conn:
                if self.dialect == "postgresql":  # replicas starting together: one creates, the others wait
                    await conn.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
                await conn.run_sync(t.metadata.create_all)
                row = (await conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version"))).first()
                if row is None:
                    await conn.execute(t.meta.insert().values(key="schema_version", value=str(t.SCHEMA_VERSION)))
                elif int(row[0]) != t.SCHEMA_VERSION:
                    raise StoreError(
                        f"store at {make_url(self.url).render_as_string(hide_password=True)} has schema version {row[0]}; "
                        f"this tracing-eval expects {t.SCHEMA_VERSION}. Point store.url at a new database or upgrade."
                    )
        except StoreError:
            await self.engine.dispose()  # no pooled connection outlives a failed open
            raise
        except Exception as exc:  # driver errors differ per database; say what and where
            await self.engine.dispose()
            raise StoreError(
                f"cannot open the store at {make_url(self.url).render_as_string(hide_password=True)}: "
                f"{exc or type(exc).__name__}"  # a connect timeout has no message of its own
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
        async with self.engine.begin() as conn:
            if batch.spans:
                rows = [  # in key order: concurrent ingests on PostgreSQL lock rows in one order, no deadlock
                    {"trace_id": s.trace_id, "span_id": s.span_id, "data": pydantic_core.to_json(s), "received_at": now}
                    for s in sorted(
                        {(s.trace_id, s.span_id): s for s in batch.spans}.values(),
                        key=lambda s: (s.trace_id, s.span_id),
                    )
                ]
                ins = self._insert(t.spans)
                upsert = ins.on_conflict_do_update(
                    index_elements=[t.spans.c.trace_id, t.spans.c.span_id],
                    set_={"data": ins.excluded.data, "received_at": ins.excluded.received_at},
                    where=t.spans.c.data != ins.excluded.data,
                ).returning(t.spans.c.trace_id)
                for chunk in _chunks(rows):
                    changed.update((await conn.execute(upsert, list(chunk))).scalars())
                stats.spans = len(rows)
            if batch.events:
                rows = []
                for trace_id, span_id, ev in batch.events:  # a repeated event has one digest: stored once
                    data = pydantic_core.to_json(ev)
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
            stats.threads_changed = await self._touch_threads(conn, batch, changed, now)
            for name, value in batch.source_state.items():
                ins = self._insert(t.source_state).values(name=name, value=value)
                await conn.execute(
                    ins.on_conflict_do_update(index_elements=[t.source_state.c.name], set_={"value": value})
                )
        return stats

    async def _touch_threads(self, conn: AsyncConnection, batch: IngestBatch, changed: set[str], now: float) -> int:
        """Record the traces in `changed` and bump their threads' versions; returns how many threads."""
        starts: dict[str, int] = {}
        for s in batch.spans:
            if s.trace_id not in changed:
                continue
            cur = starts.get(s.trace_id)
            if cur is None or (s.start_ns and (not cur or s.start_ns < cur)):
                starts[s.trace_id] = s.start_ns
        span_traces = list(starts)
        event_traces = list({tid for tid, _, _ in batch.events if tid in changed} - starts.keys())
        existing: dict[str, Any] = {}
        for chunk in _chunks(span_traces + event_traces):
            res = await conn.execute(select(t.traces).where(t.traces.c.trace_id.in_(chunk)))
            existing.update({r.trace_id: r for r in res})

        trace_rows: list[dict[str, Any]] = []
        touched: dict[str, str | None] = {}
        moved: dict[str, str] = {}  # thread a trace left -> thread it joined
        for tid in span_traces:
            old = existing.get(tid)
            conv = (old.conversation_id if old is not None else None) or batch.conversations.get(tid)
            key = thread_key(batch.source, conv, tid)
            if old is not None and old.thread_key != key:
                moved[old.thread_key] = key
            start = min((x for x in (starts[tid], old.start_ns if old is not None else 0) if x), default=0)
            trace_rows.append(
                {
                    "trace_id": tid,
                    "thread_key": key,
                    "conversation_id": conv,
                    "start_ns": start,
                    "last_received_at": now,
                }
            )
            touched[key] = conv
        for tid in event_traces:  # events for spans stored earlier change those threads too
            if tid in existing:
                touched.setdefault(existing[tid].thread_key, existing[tid].conversation_id)
                trace_rows.append({**existing[tid]._asdict(), "last_received_at": now})
        if trace_rows:
            trace_rows.sort(key=lambda r: r["trace_id"])  # one lock order across concurrent ingests
            ins = self._insert(t.traces)
            await conn.execute(
                ins.on_conflict_do_update(
                    index_elements=[t.traces.c.trace_id],
                    set_={
                        "thread_key": ins.excluded.thread_key,
                        "conversation_id": ins.excluded.conversation_id,
                        "start_ns": ins.excluded.start_ns,
                        "last_received_at": ins.excluded.last_received_at,
                    },
                ),
                trace_rows,
            )
        if touched:
            rows = [
                {
                    "key": key,
                    "source": batch.source,
                    "conversation_id": conv,
                    "version": 1,
                    "turns_evaluated_version": 0,
                    "evaluated_version": 0,
                    "first_seen_at": now,
                    "last_activity_at": now,
                    "sampled": is_sampled(key, self.sample_rate),
                    "status": "active",
                    "attempts": 0,
                    "next_eligible_at": 0.0,
                }
                for key, conv in sorted(touched.items())
            ]
            ins = self._insert(t.threads)
            await conn.execute(
                ins.on_conflict_do_update(
                    index_elements=[t.threads.c.key],
                    set_={
                        "version": t.threads.c.version + 1,
                        "last_activity_at": ins.excluded.last_activity_at,
                        "conversation_id": func.coalesce(t.threads.c.conversation_id, ins.excluded.conversation_id),
                        "status": "active",
                        "attempts": 0,
                        "next_eligible_at": 0.0,
                    },
                ),
                rows,
            )
        for key, into in sorted(moved.items()):  # a trace joined its conversation: drop the stand-alone thread
            if key in touched:
                continue
            still_used = (
                await conn.execute(select(func.count()).select_from(t.traces).where(t.traces.c.thread_key == key))
            ).scalar()
            if not still_used:
                await conn.execute(delete(t.threads).where(t.threads.c.key == key))
                await self._supersede(conn, key, into, now)
        return len(touched)

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
                        "payload": orjson.dumps(
                            {"result_id": ref, "thread_key": key, "merged_into": into, **about[ref]}
                        ),
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
        """The thread's spans grouped by trace, with log events merged into their spans."""
        async with self.engine.connect() as conn:
            trace_ids = list(
                (await conn.execute(select(t.traces.c.trace_id).where(t.traces.c.thread_key == thread_key))).scalars()
            )
            by_trace: dict[str, list[Span]] = defaultdict(list)
            events: dict[tuple[str, str], list[SpanEvent]] = defaultdict(list)
            for chunk in _chunks(trace_ids):
                for r in await conn.execute(select(t.spans.c.data).where(t.spans.c.trace_id.in_(chunk))):
                    span = Span.model_validate_json(r.data)
                    by_trace[span.trace_id].append(span)
                for r in await conn.execute(select(t.span_events).where(t.span_events.c.trace_id.in_(chunk))):
                    events[(r.trace_id, r.span_id)].append(SpanEvent.model_validate_json(r.data))
        for spans in by_trace.values():
            for s in spans:
                extra = events.get((s.trace_id, s.span_id))
                if extra:
                    s.events = sorted([*s.events, *extra], key=lambda e: e.time_ns)
        return [by_trace[tid] for tid in trace_ids if tid in by_trace]

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
        th = t.threads.c
        values: dict[str, Any] = {"lease_owner": None, "lease_until": None, "attempts": 0, "last_error": None}
        values["turns_evaluated_version"] = (
            func.max(th.turns_evaluated_version, claim.version)
            if self.dialect == "sqlite"
            else func.greatest(th.turns_evaluated_version, claim.version)
        )
        if claim.mode is Mode.THREAD:
            values["evaluated_version"] = claim.version
        async with self.engine.begin() as conn:
            res = await conn.execute(
                update(t.threads).where(th.key == claim.thread_key, th.lease_owner == claim.owner).values(**values)
            )
            if res.rowcount != 1:
                await conn.rollback()
                return False
            await self._write_results(conn, claim, outgoing, sinks, now)
            if review is not None and review.reasons and claim.mode is Mode.THREAD:
                await self._write_review(conn, claim, review, now)
        return True

    async def _write_results(
        self, conn: AsyncConnection, claim: Claim, outgoing: list[Outgoing], sinks: list[str], now: float
    ) -> None:
        if not outgoing:
            return
        known: dict[str, str] = {}
        ids = [o.id for o in outgoing]
        for chunk in _chunks(ids):
            res = await conn.execute(select(t.results.c.id, t.results.c.digest).where(t.results.c.id.in_(chunk)))
            known.update({r.id: r.digest for r in res})
        rows, deliveries = [], []
        for o in outgoing:
            data = pydantic_core.to_json(o.result)
            digest = _digest(pydantic_core.to_json(o.result.model_dump(exclude={"duration_ms"})))
            rows.append(
                {
                    "id": o.id,
                    "thread_key": claim.thread_key,
                    "target": o.target,
                    "metric": o.result.metric,
                    "thread_version": claim.version,
                    "digest": digest,
                    "data": data,
                    "updated_at": now,
                }
            )
            if known.get(o.id) == digest:
                continue  # unchanged: nothing new to deliver
            payload = orjson.dumps(
                {
                    "result_id": o.id,
                    "thread_key": claim.thread_key,
                    "target": o.target,
                    "thread_version": claim.version,
                    "anchor": o.anchor,
                    "result": orjson.loads(data),
                }
            )
            deliveries += [
                {"sink": s, "kind": "result", "ref": o.id, "digest": digest, "payload": payload, "created_at": now}
                for s in sinks
            ]
        ins = self._insert(t.results)
        await conn.execute(
            ins.on_conflict_do_update(
                index_elements=[t.results.c.id],
                set_={c: ins.excluded[c] for c in ("thread_version", "digest", "data", "updated_at", "target")},
            ),
            rows,
        )
        if deliveries:
            await conn.execute(self._insert(t.outbox).on_conflict_do_nothing(), deliveries)

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
            payload = orjson.dumps(
                {
                    "review_id": new_id,
                    "thread_key": claim.thread_key,
                    "thread_version": claim.version,
                    "anchor": review.anchor,
                    "reasons": review.reasons,
                    **review.fields,
                }
            )
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
        q = (
            select(t.outbox)
            .where(ob.sink == sink, ob.delivered_at.is_(None), ob.failed.is_(False), ob.next_attempt_at <= now)
            .order_by(ob.id)
            .limit(limit)
        )
        if self.dialect == "postgresql":
            due = q.with_only_columns(ob.id).with_for_update(skip_locked=True)
            take = (
                update(t.outbox)
                .where(ob.id.in_(due.scalar_subquery()))
                .values(next_attempt_at=now + lease_seconds)
                .returning(*t.outbox.c)
            )
            async with self.engine.begin() as conn:
                rows = sorted((await conn.execute(take)).all(), key=lambda r: r.id)
        else:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(q)).all()
        return [
            OutboxRow(r.id, r.sink, r.kind, r.ref, orjson.loads(r.payload), r.attempts, r.next_attempt_at) for r in rows
        ]

    async def renew_outbox(self, row: OutboxRow, now: float, lease_seconds: float) -> OutboxRow | None:
        """On PostgreSQL, the lease taken by `pending_outbox` is the fencing token: it is extended only
        if the row still carries it (SQLite: one sidecar, nothing to renew)."""
        if self.dialect != "postgresql":
            return row
        ob = t.outbox.c
        renew = (
            update(t.outbox)
            .where(
                ob.id == row.id,
                ob.next_attempt_at == row.lease_until,
                ob.delivered_at.is_(None),
                ob.failed.is_(False),
            )
            .values(next_attempt_at=now + lease_seconds)
            .returning(ob.next_attempt_at)
        )
        async with self.engine.begin() as conn:
            lease = (await conn.execute(renew)).scalar()
        return None if lease is None else replace(row, lease_until=lease)

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
