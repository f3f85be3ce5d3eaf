"""The SQL store: versions, readiness, leases, results, outbox and review items."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import pytest
from sqlalchemy import select, update

from tests.conftest import BACKENDS
from tests.support.results import score_result
from tracing_eval.assemble import parts_from_stored
from tracing_eval.delivery import Anchor, Delivery, ResultDelivery, ReviewDelivery, parse
from tracing_eval.model import MetricResult, Scope, Span, SpanEvent
from tracing_eval.sinks import BaseSink, deliver_outbox
from tracing_eval.store import schema
from tracing_eval.store.base import Evaluated, IngestBatch, Mode, Outgoing, Readiness, ReviewRequest
from tracing_eval.store.sql import OUTBOX_LEASE_SECONDS, SqlStore, StoreError

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)  # every test on SQLite and PostgreSQL

READY = Readiness(turn_settle=60, thread_idle=300)
T0 = 1_000_000.0


def span(trace: str, sid: str, parent: str | None = None, start: int = 1) -> Span:
    return Span(
        trace_id=trace.ljust(32, "0"), span_id=sid.ljust(16, "0"), parent_id=parent, name="chat", start_ns=start
    )


def batch(*spans: Span, conv: str | None = None, events: list[Any] | None = None) -> IngestBatch:
    convs = {s.trace_id: conv for s in spans} if conv else {}
    return IngestBatch(spans=list(spans), events=events or [], conversations=convs)


def result(metric: str = "m", score: float = 1.0, turn: int | None = None) -> MetricResult:
    return score_result(
        metric, score, threshold=0.7, scope=Scope.TURN if turn is not None else Scope.THREAD, turn_index=turn
    )


async def test_ingest_versions_threads_and_dedupes_spans(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c1"), T0)
    await store.ingest(batch(span("a", "1")), T0 + 1)  # exporter retry of the same span
    await store.ingest(batch(span("b", "2", start=5), conv="c1"), T0 + 2)
    states = await store.thread_states()
    assert [s["key"] for s in states] == ["otlp:c1"]
    assert states[0]["version"] == 2 and states[0]["last_activity_at"] == T0 + 2
    traces = await store.load_traces("otlp:c1")
    assert sorted(len(t) for t in traces) == [1, 1]


async def test_a_resent_batch_changes_nothing_but_new_content_does(store: SqlStore) -> None:
    """An exporter retry (or a re-pulled overlap) must not make an evaluated thread due again."""
    ev = SpanEvent(name="gen_ai.client.inference.operation.details", time_ns=3, attributes={"k": 1})
    a = span("a", "1")
    first = batch(a, span("a", "2", parent=a.span_id), conv="c1", events=[(a.trace_id, a.span_id, ev)])
    stats = await store.ingest(first, T0)
    assert stats.threads_changed == 1
    stats = await store.ingest(first, T0 + 5)
    assert (stats.spans, stats.events, stats.threads_changed) == (2, 1, 0)
    (state,) = await store.thread_states()
    assert state["version"] == 1 and state["last_activity_at"] == T0, "a resend must not restart readiness"

    changed = a.model_copy(update={"end_ns": 99})  # the same span with new content
    assert (await store.ingest(batch(changed, conv="c1"), T0 + 6)).threads_changed == 1
    ev2 = SpanEvent(name="gen_ai.client.inference.operation.details", time_ns=4, attributes={"k": 2})
    assert (await store.ingest(batch(events=[(a.trace_id, a.span_id, ev2)]), T0 + 7)).threads_changed == 1
    (state,) = await store.thread_states()
    assert state["version"] == 3 and state["last_activity_at"] == T0 + 7
    (trace,) = await store.load_traces("otlp:c1")
    assert {s.span_id: s.end_ns for s in trace}[a.span_id] == 99


async def test_trace_joins_its_conversation_when_the_id_arrives_later(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1")), T0)  # child without conversation id first
    assert await store.thread_keys() == ["otlp:trace:" + "a".ljust(32, "0")]
    await store.ingest(batch(span("a", "2"), conv="c9"), T0 + 1)
    assert await store.thread_keys() == ["otlp:c9"]
    assert len((await store.load_traces("otlp:c9"))[0]) == 2


async def test_log_events_are_joined_to_their_span_and_bump_the_thread(store: SqlStore) -> None:
    s = span("a", "1")
    await store.ingest(batch(s, conv="c"), T0)
    ev = SpanEvent(name="gen_ai.client.inference.operation.details", time_ns=3, attributes={"k": 1})
    await store.ingest(IngestBatch(events=[(s.trace_id, s.span_id, ev)]), T0 + 5)
    await store.ingest(IngestBatch(events=[(s.trace_id, s.span_id, ev)]), T0 + 6)  # retried log export
    [[loaded]] = await store.load_traces("otlp:c")
    assert [e.name for e in loaded.events] == [ev.name]
    assert (await store.thread_states())[0]["version"] == 2  # the retried export changed nothing


async def test_claim_waits_for_settle_then_idle_and_leases_once(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    assert await store.claim("w1", T0 + 10, READY, 10, 30) == []
    [turns] = await store.claim("w1", T0 + 61, READY, 10, 30)
    assert turns.mode is Mode.TURNS and turns.version == 1
    assert await store.claim("w2", T0 + 62, READY, 10, 30) == []  # leased to w1
    assert await store.record(turns, [], None, [], T0 + 63)
    assert await store.claim("w1", T0 + 100, READY, 10, 30) == []  # turns done, thread not idle yet
    [whole] = await store.claim("w2", T0 + 301, READY, 10, 30)
    assert whole.mode is Mode.THREAD
    assert await store.record(whole, [], None, [], T0 + 302)
    assert await store.claim("w1", T0 + 10_000, READY, 10, 30) == []  # nothing changed since


async def test_expired_lease_is_reclaimed_and_the_old_owner_cannot_record(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c1] = await store.claim("w1", T0 + 400, READY, 10, 30)
    [c2] = await store.claim("w2", T0 + 431, READY, 10, 30)  # w1's lease expired
    assert not await store.record(c1, [Outgoing("id1", "thread", result())], None, [], T0 + 432)
    assert await store.record(c2, [Outgoing("id1", "thread", result())], None, [], T0 + 433)
    assert [r.id for r in await store.results()] == ["id1"]


async def test_a_batch_records_only_the_claims_that_still_hold_their_lease(store: SqlStore) -> None:
    """One `record_many` over claims of both modes, one of them taken over by another worker: the
    others are recorded and marked by their mode (turns: the turns evaluated; thread: the thread
    too), the lost one writes nothing and keeps the other worker's lease."""
    await store.ingest(batch(span("a", "1"), conv="c1"), T0)
    [turns] = await store.claim("w1", T0 + 61, READY, 10, 1000)  # c1 settled, not idle
    await store.ingest(batch(span("b", "2"), conv="c2"), T0 + 100)
    await store.ingest(batch(span("c", "3"), conv="c3"), T0 + 100)
    lost, whole = sorted(await store.claim("w1", T0 + 401, READY, 10, 30), key=lambda c: c.thread_key)
    assert (turns.mode, lost.mode, whole.mode) == (Mode.TURNS, Mode.THREAD, Mode.THREAD)
    async with store.engine.begin() as conn:  # w2 took `lost` over after w1's lease ran out
        await conn.execute(
            update(schema.threads).where(schema.threads.c.key == lost.thread_key).values(lease_owner="w2")
        )
    items = [Evaluated(c, [Outgoing(f"id-{c.thread_key}", "thread", result())], None, {}) for c in (whole, lost, turns)]
    assert await store.record_many(items, [], T0 + 433) == [True, False, True]
    assert sorted(r.id for r in await store.results()) == sorted([f"id-{whole.thread_key}", f"id-{turns.thread_key}"])
    th = schema.threads.c
    async with store.engine.connect() as conn:
        rows = await conn.execute(select(th.key, th.lease_owner, th.turns_evaluated_version, th.evaluated_version))
        state = {r.key: (r.lease_owner, r.turns_evaluated_version, r.evaluated_version) for r in rows}
    assert state == {turns.thread_key: (None, 1, 0), whole.thread_key: (None, 1, 1), lost.thread_key: ("w2", 0, 0)}
    with pytest.raises(ValueError, match="two claims of one thread"):
        await store.record_many([items[0], items[0]], [], T0 + 434)


async def test_new_span_after_evaluation_makes_a_new_version(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.record(c, [], None, [], T0 + 401)
    await store.ingest(batch(span("b", "2"), conv="c"), T0 + 500)
    [again] = await store.claim("w", T0 + 900, READY, 10, 30)
    assert again.version == 2 and again.mode is Mode.THREAD


async def test_outbox_rows_only_for_changed_results_and_review_once_per_version(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    reasons = [
        {
            "metric": "m",
            "target": "thread",
            "score": 0.0,
            "threshold": 0.7,
            "label": None,
            "status": "ok",
            "reason": "x",
        }
    ]
    out = [Outgoing("r1", "thread", result(score=0.0)), Outgoing("r2", "trace:a", result("t", 1.0, turn=0))]
    assert await store.record(c, out, ReviewRequest(reasons, ["hook"]), ["hook"], T0 + 401)
    rows = await store.pending_outbox("hook", T0 + 402, 100)
    assert sorted((r.kind, r.ref) for r in rows) == [("result", "r1"), ("result", "r2"), ("review", "otlp:c@1")]

    # the thread grows; the same results come out again: only the changed one is owed again
    await store.ingest(batch(span("b", "2"), conv="c"), T0 + 500)
    [c2] = await store.claim("w", T0 + 900, READY, 10, 30)
    out2 = [Outgoing("r1", "thread", result(score=0.5)), Outgoing("r2", "trace:a", result("t", 1.0, turn=0))]
    assert await store.record(c2, out2, ReviewRequest(reasons, ["hook"]), ["hook"], T0 + 901)
    rows = await store.pending_outbox("hook", T0 + 902, 100)
    assert sorted((r.kind, r.ref) for r in rows) == [
        ("result", "r1"),
        ("result", "r1"),
        ("result", "r2"),
        ("review", "otlp:c@1"),
        ("review", "otlp:c@2"),
    ]
    items = await store.review_items(None)
    assert [(i.thread_version, i.status) for i in items] == [(1, "superseded"), (2, "open")]
    assert await store.resolve_review(items[1].id, "looked at it", T0 + 903)
    assert not await store.resolve_review(items[1].id, "twice", T0 + 904)


class FlakySink(BaseSink):
    name = "hook"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[Delivery] = []

    async def deliver(self, delivery: Delivery) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("sink down")
        self.received.append(delivery)


async def test_outbox_delivery_retries_with_backoff_and_delivers_once(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.record(c, [Outgoing("r1", "thread", result())], None, ["hook"], T0 + 401)
    sink = FlakySink(failures=2)
    stats = await deliver_outbox(store, [sink], T0 + 402, max_attempts=5)
    assert (stats.delivered, stats.retried) == (0, 1)
    assert (await deliver_outbox(store, [sink], T0 + 402.5, max_attempts=5)).retried == 0  # backing off
    await deliver_outbox(store, [sink], T0 + 404, max_attempts=5)
    stats = await deliver_outbox(store, [sink], T0 + 410, max_attempts=5)
    assert stats.delivered == 1
    await deliver_outbox(store, [sink], T0 + 1000, max_attempts=5)
    assert [d.result_id for d in sink.received if isinstance(d, ResultDelivery)] == ["r1"]


async def test_one_delivery_round_takes_every_due_row_in_batches_until_a_sink_fails(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.record(c, [Outgoing(f"r{i}", f"trace:{i}", result()) for i in range(12)], None, ["hook"], T0 + 401)
    sink = FlakySink(failures=0)
    stats = await deliver_outbox(store, [sink], T0 + 402, max_attempts=5, limit=5)
    assert (stats.delivered, len(sink.received), await store.outbox_backlog()) == (12, 12, 0)

    await store.ingest(batch(span("b", "1"), conv="d"), T0 + 500)
    [c] = await store.claim("w", T0 + 900, READY, 10, 30)
    await store.record(c, [Outgoing(f"s{i}", f"trace:{i}", result()) for i in range(12)], None, ["hook"], T0 + 901)
    down = FlakySink(failures=1)  # fails the first row of the first batch: no second batch this round
    stats = await deliver_outbox(store, [down], T0 + 902, max_attempts=5, limit=5)
    assert (stats.delivered, stats.retried, await store.outbox_backlog()) == (4, 1, 8)


async def test_a_crash_between_a_row_by_row_delivery_and_its_mark_loses_nothing(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.record(c, [Outgoing(f"r{i}", f"trace:{i}", result()) for i in range(25)], None, ["hook"], T0 + 401)
    marks: list[int] = []
    mark_done = store.outbox_done

    async def crashing(row_ids: Any, now: float) -> None:
        marks.append(len(row_ids))
        if len(marks) == 12:  # the process dies after the twelfth row went out, before it was marked
            raise RuntimeError("crash")
        await mark_done(row_ids, now)

    monkeypatch.setattr(store, "outbox_done", crashing)
    sink = FlakySink(failures=0)
    with pytest.raises(RuntimeError, match="crash"):
        await deliver_outbox(store, [sink], T0 + 402, max_attempts=5)
    assert marks == [1] * 12 and len(sink.received) == 12  # each row marked as soon as it went out
    assert await store.outbox_backlog() == 14  # the twelfth was not marked: still owed
    monkeypatch.undo()
    later = T0 + 402 + 2 * OUTBOX_LEASE_SECONDS  # on PostgreSQL the dead replica's lease has run out
    stats = await deliver_outbox(store, [sink], later, max_attempts=5)
    assert (stats.delivered, await store.outbox_backlog()) == (14, 0)
    ids = [d.result_id for d in sink.received if isinstance(d, ResultDelivery)]
    assert sorted(set(ids)) == sorted(f"r{i}" for i in range(25))  # none lost
    assert len(ids) == 26  # the one delivered but not marked went again (sinks write idempotently)


async def test_release_with_give_up_parks_the_thread(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.release(c, "boom", T0 + 401, 0, give_up=True)
    assert await store.claim("w", T0 + 10_000, READY, 10, 30) == []
    state = (await store.thread_states())[0]
    assert state["status"] == "failed" and state["last_error"] == "boom"


async def test_sampling_is_deterministic_and_skips_unsampled_threads(settings: Any) -> None:
    s = SqlStore(settings.store.url, sample_rate=0.0)
    await s.open()
    try:
        await s.ingest(batch(span("a", "1"), conv="c"), T0)
        assert await s.claim("w", T0 + 10_000, READY, 10, 30) == []
    finally:
        await s.close()


async def test_schema_version_mismatch_is_a_clear_error(store: SqlStore, settings: Any) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(update(schema.meta).values(value="999"))
    other = SqlStore(settings.store.url)
    with pytest.raises(StoreError, match="schema version 999"):
        await other.open()
    await other.close()


async def test_a_sqlite_too_old_for_the_store_is_a_clear_error(
    tmp_path: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    with pytest.raises(StoreError, match=r"SQLite 3\.31\.1 is too old for the store: it needs 3\.35\.0 or newer"):
        await store.open()
    assert not (tmp_path / "old.db").exists()


async def test_unreachable_store_is_a_clear_error(tmp_path: Any, backend: str) -> None:
    if backend == "sqlite":
        url, shown = f"sqlite+aiosqlite:///{tmp_path}/missing-dir/x.db", f"{tmp_path}/missing-dir/x.db"
    else:  # nothing listens on port 1; the password must not show up in the message
        url, shown = "postgresql+asyncpg://tester:s3cret@127.0.0.1:1/nowhere", "tester:***@127.0.0.1:1/nowhere"
    s = SqlStore(url)
    with pytest.raises(StoreError, match="cannot open the store") as err:
        await s.open()
    assert shown in str(err.value) and "s3cret" not in str(err.value)
    await s.close()


async def test_outbox_payloads_carry_the_anchor_sinks_attach_to(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    anchor = Anchor(trace_id="a" * 32, span_id="1" * 16, start_ns=5, conversation_id="c", environment="prod")
    reasons = [
        {
            "metric": "m",
            "target": "thread",
            "score": 0.0,
            "threshold": 0.7,
            "label": None,
            "status": "ok",
            "reason": "x",
        }
    ]
    out = [Outgoing("r1", "thread", result(score=0.0), anchor)]
    await store.record(c, out, ReviewRequest(reasons, ["hook"], anchor=anchor), ["hook"], T0 + 401)
    rows = {r.kind: parse(r.kind, r.payload) for r in await store.pending_outbox("hook", T0 + 402, 10)}
    result_row, review_row = rows["result"], rows["review"]
    assert isinstance(result_row, ResultDelivery) and isinstance(review_row, ReviewDelivery)
    assert result_row.anchor == anchor and review_row.anchor == anchor
    assert (result_row.session_id, result_row.thread_key, result_row.thread_version) == ("c", c.thread_key, c.version)
    assert (review_row.session_id, review_row.reasons) == ("c", reasons) and not result_row.legacy


async def test_review_forwarded_only_is_recorded_but_not_open_locally(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    reasons = [
        {
            "metric": "m",
            "target": "thread",
            "score": 0.0,
            "threshold": 0.7,
            "label": None,
            "status": "ok",
            "reason": "x",
        }
    ]
    review = ReviewRequest(reasons, ["hook"], local=False, fields={"priority": "high"})
    await store.record(c, [], review, [], T0 + 401)
    assert await store.review_items("open") == []
    [row] = await store.pending_outbox("hook", T0 + 402, 10)
    item = parse(row.kind, row.payload)
    assert isinstance(item, ReviewDelivery) and item.priority == "high"


async def test_free_form_ids_of_any_length_fit_every_column(store: SqlStore) -> None:
    """Langfuse ids are free-form (and a v3 trace's virtual root is `t-<trace id>`); PostgreSQL
    enforces column lengths where SQLite does not, so long ids must fit on both."""
    tid = "lf-" + "7" * 61
    s = Span(trace_id=tid, span_id="t-" + tid, name="chat", start_ns=1)
    await store.ingest(IngestBatch(spans=[s], conversations={tid: "session-" + "y" * 600}, source="langfuse"), T0)
    [c] = await store.claim("replica-" + "z" * 200, T0 + 400, READY, 10, 30)
    reasons = [{"metric": "t", "target": "thread", "score": 0.0, "threshold": 0.7, "status": "ok", "reason": "x"}]
    out = [Outgoing("r1", f"trace:{tid}", result("t", 0.0, turn=0))]
    assert await store.record(c, out, ReviewRequest(reasons, ["hook"]), ["hook"], T0 + 401)
    rows = await store.pending_outbox("hook", T0 + 402, 10)
    assert sorted(r.kind for r in rows) == ["result", "review"]
    assert [[x.span_id for x in trace] for trace in await store.load_traces(c.thread_key)] == [["t-" + tid]]


async def test_outbox_errors_are_stored_without_url_credentials(store: SqlStore) -> None:
    class Leaky(BaseSink):
        name = "hook"

        async def deliver(self, delivery: Delivery) -> None:
            raise ConnectionError("POST https://bob:hunter2@hooks.example/x refused")

    await store.ingest(batch(span("a", "1"), conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    await store.record(c, [Outgoing("r1", "thread", result())], None, ["hook"], T0 + 401)
    await deliver_outbox(store, [Leaky()], T0 + 402, max_attempts=5)
    async with store.engine.connect() as conn:
        [error] = (await conn.execute(schema.outbox.select().with_only_columns(schema.outbox.c.last_error))).scalars()
    assert "hunter2" not in error and "https://[redacted]@hooks.example" in error


async def test_a_draining_worker_gives_back_its_leases(store: SqlStore) -> None:
    await store.ingest(batch(span("a", "1"), conv="c1"), T0)
    await store.ingest(batch(span("b", "2"), conv="c2"), T0)
    claims = await store.claim("w1", T0 + 400, READY, 10, 300)
    assert len(claims) == 2
    assert await store.release_owned("w1") == 2
    assert len(await store.claim("w2", T0 + 401, READY, 10, 300)) == 2  # no wait for lease expiry
    assert not await store.record(claims[0], [], None, [], T0 + 402)  # the drained worker cannot record


async def test_a_turn_stored_before_environments_were_kept_is_assembled_again(store: SqlStore) -> None:
    """A trace's stored part written by an earlier version has no environment: while the trace's
    spans remain, it is assembled again (and then carries it), instead of being read as it is."""
    root = span("a", "1").model_copy(update={"attributes": {"langfuse.environment": "production"}})
    await store.ingest(batch(root, conv="c"), T0)
    [c] = await store.claim("w", T0 + 400, READY, 10, 30)
    parts, fresh = parts_from_stored(await store.load_thread(c.thread_key))
    assert [p.environment for p in parts] == ["production"] and list(fresh) == [root.trace_id]
    revision, data = fresh[root.trace_id]
    assert await store.record_many([Evaluated(c, [], None, {root.trace_id: (revision, data)})], [], T0 + 401)
    stored = await store.load_thread(c.thread_key)
    assert (list(stored.parts), stored.traces) == ([root.trace_id], {})  # a current part is read as it is
    earlier = orjson.dumps({k: v for k, v in orjson.loads(data).items() if k != "environment"})
    async with store.engine.begin() as conn:  # the part as the previous version stored it
        await conn.execute(update(schema.turns).where(schema.turns.c.trace_id == root.trace_id).values(data=earlier))
    stored = await store.load_thread(c.thread_key)
    assert list(stored.traces) == [root.trace_id] and stored.parts == {}  # assembled again
    parts, _ = parts_from_stored(stored)
    assert [p.environment for p in parts] == ["production"]
