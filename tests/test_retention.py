"""Retention: spans go after `spans_days` while turns stay, whole threads after `results_days`,
delivered outbox rows, finished review items and old judge answers after theirs; the space is given
back; a thread that grows after its spans went is evaluated whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tracing_eval.assemble import thread_from_stored
from tracing_eval.config import Settings
from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces
from tracing_eval.ingest import make_batch
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.pipeline import Pipeline, TickStats
from tracing_eval.retention import DAY
from tracing_eval.store import schema as t
from tracing_eval.store.base import IngestBatch
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry
from tracing_eval.worker import Worker

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)

T0 = 1_800_000_000.0


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def turn(conversation: str, i: int, history: list[dict[str, Any]]) -> IngestBatch:
    """Turn `i` of a conversation as the OTel GenAI instrumentation sends it (history included);
    `history` grows by the turn's messages."""
    user, answer = f"Question {i}: where is order A{4800 + i}?", f"Answer {i}: order A{4800 + i} ships tomorrow."
    spans = genai_turn_spans(conversation, user, answer, history)
    history += [
        {"role": "user", "parts": [{"type": "text", "content": user}]},
        {"role": "assistant", "parts": [{"type": "text", "content": answer}]},
    ]
    return make_batch(decode_traces(trace_request(spans).SerializeToString(), PROTOBUF).spans, [])


async def count(store: SqlStore, table: Any, *where: Any) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table).where(*where))).scalar() or 0)


def pipeline(store: SqlStore, settings: Settings, clock: Clock, telemetry: Telemetry | None = None) -> Pipeline:
    settings.metrics.enabled = ["repetition", "thread_stats", "response_hygiene"]
    return Pipeline(store, settings, build_metrics(settings), owner="w", clock=clock, telemetry=telemetry)


async def test_spans_go_after_spans_days_and_a_thread_that_grows_later_is_evaluated_whole(
    store: SqlStore, settings: Settings
) -> None:
    clock, history = Clock(T0), []
    p = pipeline(store, settings, clock)
    for i in range(2):
        await store.ingest(turn("c", i, history), clock())
    assert (await p.tick(settle_all=True, deliver=False)).threads_evaluated == 1
    results = await count(store, t.results)
    assert await count(store, t.spans) == 4 and await count(store, t.messages) > 0

    clock.now += 6 * DAY  # not idle long enough
    assert not (await p.retain()).deleted
    clock.now += 2 * DAY
    run = await p.retain()
    assert run.deleted["spans"] == 4 and run.deleted["messages"] > 0 and run.finished
    assert await count(store, t.spans) == 0 and await count(store, t.messages) == 0
    assert await count(store, t.traces, t.traces.c.pruned.is_(True)) == 2
    assert await count(store, t.results) == results  # the evaluation history stays
    [state] = await store.thread_states()
    assert state["status"] == "pruned"
    assert not (await p.retain()).deleted  # nothing left to do

    await store.ingest(turn("c", 2, history), clock())  # the conversation goes on
    [state] = await store.thread_states()
    assert state["status"] == "active"
    stats = await p.tick(settle_all=True, deliver=False)
    assert stats.threads_evaluated == 1 and stats.errors == 0
    thread, _ = thread_from_stored(await store.load_thread("otlp:c"))
    assert [m.content for m in thread.turns[0].messages] == [
        "Question 0: where is order A4800?",
        "Answer 0: order A4800 ships tomorrow.",
    ]
    assert [tr.index for tr in thread.turns] == [0, 1, 2]
    targets = {r.target for r in await store.results("otlp:c") if r.result.metric == "response_hygiene"}
    assert {f"trace:{tr.trace_id}" for tr in thread.turns} <= targets
    [stats_result] = [r.result for r in await store.results("otlp:c") if r.result.metric == "thread_stats"]
    assert stats_result.evidence["turns"] == 3

    clock.now += 91 * DAY  # idle past results_days: nothing of it is left
    run = await p.retain()
    assert run.deleted["threads"] == 1 and run.deleted["results"] > 0
    for table in (t.threads, t.traces, t.turns, t.results, t.spans, t.messages, t.review_items):
        assert await count(store, table) == 0, table.name


async def test_a_thread_not_evaluated_at_its_last_version_keeps_its_spans(store: SqlStore, settings: Settings) -> None:
    clock, history = Clock(T0), []
    p = pipeline(store, settings, clock)
    await store.ingest(turn("c", 0, history), clock())
    await p.tick(settle_all=True, deliver=False)
    await store.ingest(turn("c", 1, history), clock())  # a new turn, not evaluated yet
    clock.now += 30 * DAY
    assert not (await p.retain()).deleted
    assert await count(store, t.spans) == 4


async def test_traces_never_assembled_are_assembled_before_their_spans_go(store: SqlStore, settings: Settings) -> None:
    """A store upgraded from schema 1 has no stored turns: retention keeps the turns all the same."""
    clock, history = Clock(T0), []
    p = pipeline(store, settings, clock)
    for i in range(3):
        await store.ingest(turn("c", i, history), clock())
    await p.tick(settle_all=True, deliver=False)
    before, _ = thread_from_stored(await store.load_thread("otlp:c"))
    async with store.engine.begin() as conn:
        await conn.execute(delete(t.turns))
    clock.now += 8 * DAY
    assert (await p.retain()).deleted["spans"] == 6
    after, _ = thread_from_stored(await store.load_thread("otlp:c"))
    assert after.turns == before.turns and len(after.turns) == 3


async def test_outbox_review_items_and_judge_answers_go_after_their_days(store: SqlStore, settings: Settings) -> None:
    from tests.support.results import score_result
    from tracing_eval.model import Scope
    from tracing_eval.store.base import Outgoing, Readiness, ReviewRequest

    clock, history = Clock(T0), []
    p = pipeline(store, settings, clock)
    for conv in ("a", "b"):
        await store.ingest(turn(conv, 0, []), clock())
    claims = await store.claim("w", clock(), Readiness(0, 0), 10, 60)
    result = score_result("m", 0.1, threshold=0.7, scope=Scope.THREAD)
    for claim in claims:
        review = ReviewRequest([{"metric": "m"}], ["hook"])
        assert await store.record(claim, [Outgoing(f"r-{claim.thread_key}", "thread", result)], review, ["hook"], T0)
    rows = await store.pending_outbox("hook", T0, 10)
    await store.outbox_done([r.id for r in rows if r.ref == "r-otlp:a"], T0)  # one delivered, the rest pending
    [first, second] = await store.review_items()
    assert await store.resolve_review(first.id, "fixed", T0)
    await store.cache_put("k1", {"text": "yes"}, T0)
    del history

    clock.now += 8 * DAY
    run = await p.retain()
    assert run.deleted["outbox"] == 1 and run.deleted["judge_cache"] == 1 and "review_items" not in run.deleted
    assert await count(store, t.outbox) == len(rows) - 1  # undelivered rows stay
    assert await store.cache_get("k1") is None
    clock.now += 23 * DAY
    run = await p.retain()
    assert run.deleted["review_items"] == 1
    assert [i.id for i in await store.review_items(None)] == [second.id]  # the open one stays


async def test_retention_gives_the_space_back_and_metrics_show_it(store: SqlStore, settings: Settings) -> None:
    clock = Clock(T0)
    telemetry = Telemetry()
    p = pipeline(store, settings, clock, telemetry)
    for c in range(30):
        history: list[dict[str, Any]] = []
        for i in range(4):
            await store.ingest(turn(f"c{c}", i, history), clock())
    await p.tick(settle_all=True, deliver=False)
    await p.observe_store()
    size_before = telemetry.store_bytes._value.get()
    assert size_before == (await store.size())[0] > 0
    clock.now += 8 * DAY
    run = await p.retain()
    assert run.deleted["spans"] == 30 * 4 * 2
    await p.observe_store()
    text = telemetry.exposition().decode()
    assert 'tracing_eval_retention_deleted_total{table="spans"} 240.0' in text
    assert 'tracing_eval_retention_runs_total{finished="true"}' in text
    if store.dialect == "sqlite":  # the file itself shrinks; PostgreSQL reuses the space of deleted rows
        assert run.reclaimed_pages > 0
        size_after, free = await store.size()
        assert size_after < size_before and free is not None and free < 4096 * 8
        assert telemetry.store_bytes._value.get() == size_after


async def test_history_nodes_are_stored_once_per_thread(store: SqlStore, settings: Settings) -> None:
    """Each chat span carries the whole history, yet each message is stored once in its thread."""
    history: list[dict[str, Any]] = []
    for i in range(12):
        await store.ingest(turn("long", i, history), T0 + i)
    async with store.engine.connect() as conn:
        datas = list((await conn.execute(select(t.messages.c.data))).scalars())
    texts = [json.loads(d) for d in datas]
    # the system prompt, every message of turns 0..10 and the question of turn 11: once each
    assert len(texts) == 1 + 2 * 11 + 1
    assert sum(1 for x in texts if "Question 0:" in json.dumps(x)) == 1
    async with store.engine.connect() as conn:
        stored = list((await conn.execute(select(t.spans.c.data))).scalars())
    assert not any(b"Question 0:" in data for data in stored)  # the spans refer to the history, never repeat it
    thread, _ = thread_from_stored(await store.load_thread("otlp:long"))
    assert len(thread.turns) == 12 and thread.turns[11].user_text == "Question 11: where is order A4811?"
    chats = [s for trace in await store.load_traces("otlp:long") for s in trace if s.name.startswith("chat")]
    lengths = sorted(len(json.loads(s.attributes["gen_ai.input.messages"])) for s in chats)
    assert lengths == [2 + 2 * i for i in range(12)]  # every history read back whole


async def test_a_schema_1_store_is_upgraded_in_place(store: SqlStore, settings: Settings) -> None:
    """Spans stored by schema 1 (histories inline, no revisions, no stored turns) read back, are
    evaluated, and keep their turns when retention deletes them."""
    import pydantic_core
    from sqlalchemy import text, update

    clock, history = Clock(T0), []
    batch = turn("old", 0, history)
    async with store.engine.begin() as conn:  # the store as schema 1 left it
        for table in ("messages", "turns"):
            await conn.execute(text(f"DROP TABLE {table}"))
        for index in t.V2_INDEXES:
            await conn.execute(text(f"DROP INDEX {index}"))
        for column in ("revision", "pruned"):
            await conn.execute(text(f"ALTER TABLE traces DROP COLUMN {column}"))
        await conn.execute(update(t.meta).values(value="1"))
        for s in batch.spans:
            await conn.execute(
                t.spans.insert().values(
                    trace_id=s.trace_id, span_id=s.span_id, data=pydantic_core.to_json(s), received_at=T0
                )
            )
        [tid] = {s.trace_id for s in batch.spans}
        await conn.execute(
            text(
                "INSERT INTO traces (trace_id, thread_key, conversation_id, start_ns, last_received_at) "
                "VALUES (:t, 'otlp:old', 'old', 1, :now)"
            ),
            {"t": tid, "now": T0},
        )
        await conn.execute(
            t.threads.insert().values(
                key="otlp:old", source="otlp", conversation_id="old", first_seen_at=T0, last_activity_at=T0
            )
        )
    await store.close()
    upgraded = SqlStore(settings.store.url)
    await upgraded.open()
    try:
        async with upgraded.engine.connect() as conn:
            assert (await conn.execute(select(t.meta.c.value))).scalar() == str(t.SCHEMA_VERSION)
        p = pipeline(upgraded, settings, clock)
        assert (await p.tick(settle_all=True, deliver=False)).threads_evaluated == 1
        await upgraded.ingest(turn("old", 1, history), clock())  # new spans go the new way
        await p.tick(settle_all=True, deliver=False)
        clock.now += 8 * DAY
        assert (await p.retain()).deleted["spans"] == 4
        thread, _ = thread_from_stored(await upgraded.load_thread("otlp:old"))
        assert [tr.user_text for tr in thread.turns] == [
            "Question 0: where is order A4800?",
            "Question 1: where is order A4801?",
        ]
    finally:
        await upgraded.close()


async def test_the_worker_ticks_again_at_once_while_a_tick_ran_out_of_time_with_threads_ready(
    store: SqlStore, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick stops claiming after `tick_seconds`; with full batches still ready the worker does not
    idle until the next interval (the sidecar's drain ran at two thirds of its core that way) but
    ticks again, until a batch comes back short."""
    clock = Clock(T0)
    settings.schedule.batch_size = 2
    settings.schedule.tick_seconds = 1e-9  # every tick's time runs out after its first batch
    p = pipeline(store, settings, clock)
    for c in range(5):
        await store.ingest(turn(f"w{c}", 0, []), clock())
    clock.now += settings.schedule.thread_idle_seconds + 1
    ticks: list[TickStats] = []
    tick = p.tick

    async def counted(**kwargs: Any) -> TickStats:
        ticks.append(await tick(**kwargs))
        return ticks[-1]

    monkeypatch.setattr(p, "tick", counted)
    assert await Worker(settings, p).tick() is ticks[-1]
    assert [s.threads_evaluated for s in ticks] == [2, 2, 1]
    assert [s.more for s in ticks] == [True, True, False]
    assert all(s["evaluated_version"] == s["version"] for s in await store.thread_states())


async def test_a_tick_claims_batch_after_batch_while_full_batches_are_ready(
    store: SqlStore, settings: Settings
) -> None:
    """A backlog drains without waiting a tick interval per batch."""
    clock = Clock(T0)
    settings.schedule.batch_size = 3
    p = pipeline(store, settings, clock)
    for c in range(7):
        await store.ingest(turn(f"b{c}", 0, []), clock())
    clock.now += settings.schedule.thread_idle_seconds + 1
    stats = await p.tick(deliver=False)
    assert stats.threads_evaluated == 7 and stats.errors == 0
    assert all(s["evaluated_version"] == s["version"] for s in await store.thread_states())
