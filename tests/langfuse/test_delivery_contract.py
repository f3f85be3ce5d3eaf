"""The Langfuse sink writes from the delivery the pipeline built: it reads no spans back, and rows
written before the typed contract (the old dict payload) still land exactly where new ones do."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import update

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.langfuse_harness import (
    FAILING_TURNS,
    OK_TURNS,
    Worker,
    assert_routed_once,
    assert_scores_match,
    lf_settings,
    outbox_deliveries,
)
from tracing_eval.config import Settings
from tracing_eval.delivery import ResultDelivery
from tracing_eval.store import schema


def forbid_span_reads(monkeypatch: pytest.MonkeyPatch, worker: Worker) -> list[str]:
    """Make every store method that reads spans or assembles a thread fail, and list the calls."""
    calls: list[str] = []
    for name in ("load_traces", "load_thread", "load_threads"):

        async def refuse(*_: Any, _name: str = name, **__: Any) -> Any:
            calls.append(_name)
            raise AssertionError(f"the sink read the store: {_name}")

        monkeypatch.setattr(worker.store, name, refuse)
    return calls


@pytest.fixture
async def worker(settings: Settings) -> Any:
    with FakeLangfuseServer("v4") as server:
        server.seed_session("s-fail", FAILING_TURNS, environment="production")
        server.seed_session("s-ok", OK_TURNS, environment="production")
        w = await Worker(settings, server, lf_settings(server)).start()
        yield w
        await w.stop()


async def test_delivery_reads_no_spans_and_scores_carry_the_environment(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await worker.pipeline.tick(settle_all=True, deliver=False)
    calls = forbid_span_reads(monkeypatch, worker)
    stats = await worker.pipeline.deliver()
    assert stats.delivered > 0 and (stats.failed, stats.retried) == (0, 0) and calls == []
    monkeypatch.undo()
    assert await worker.store.outbox_backlog() == 0
    await assert_scores_match(worker.store, worker.server)
    await assert_routed_once(worker.store, worker.server)
    assert {r.environment for r in worker.server.scores} == {"production"}
    worker.server.assert_no_violations()


def old_shape(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as the previous version wrote it: no format, no session id, no environment."""
    old = {k: v for k, v in payload.items() if k not in ("format", "session_id", "links")}
    old["anchor"] = {k: v for k, v in payload["anchor"].items() if k != "environment"}
    if kind == "review" and payload.get("destinations") is None:
        old.pop("destinations", None)
    return old


async def test_rows_of_the_old_shape_are_delivered_to_the_same_scores(worker: Worker) -> None:
    """Rows of the previous payload shape, still waiting after an upgrade, are delivered: their
    anchors are rebuilt from the store once (the environment was not in them), and every score
    write is the same as the write of the new row (same id, timestamp, target, environment and
    body, so the same ingestion event id)."""
    server = worker.server
    await worker.pipeline.tick(settle_all=True, deliver=False)
    assert (await worker.pipeline.deliver()).failed == 0
    new_writes = [w.body for w in server.score_requests]
    assert new_writes

    ob = schema.outbox.c
    async with worker.store.engine.begin() as conn:
        rows = (await conn.execute(schema.outbox.select().where(ob.sink == "langfuse"))).all()
        for row in rows:
            old = orjson.dumps(old_shape(row.kind, orjson.loads(row.payload)))
            await conn.execute(
                update(schema.outbox)
                .where(ob.id == row.id)
                .values(payload=old, delivered_at=None, attempts=0, next_attempt_at=0.0)
            )
    legacy = [d for d in await outbox_deliveries(worker.store, "langfuse") if isinstance(d, ResultDelivery)]
    assert legacy and all(d.legacy and d.anchor.environment is None for d in legacy)
    assert {d.session_id for d in legacy} == {"s-fail", "s-ok"}  # derived from the thread key

    stats = await worker.pipeline.deliver()
    assert (stats.delivered, stats.failed, stats.retried) == (len(rows), 0, 0)
    assert [w.body for w in server.score_requests[len(new_writes) :]] == new_writes
    assert all(w.replaced for w in server.score_requests[len(new_writes) :])
    await assert_scores_match(worker.store, server)
    await assert_routed_once(worker.store, server)  # the old review row is recognised as routed already
    assert {r.environment for r in server.scores} == {"production"}
    server.assert_no_violations()
