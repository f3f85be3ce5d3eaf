"""The Langfuse sink writes from the delivery the pipeline built: it reads no spans back, and rows
written before the typed contract (the old dict payload) still land exactly where new ones do."""

from __future__ import annotations

import time
from collections import Counter
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
from tracing_eval.connectors.langfuse.sink import MAX_REQUEST_SCORES
from tracing_eval.delivery import Delivery, ResultDelivery, ReviewDelivery
from tracing_eval.model import Status
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


def written(deliveries: list[Delivery]) -> list[str]:
    """The result ids the sink writes as scores: results with status ok and a score."""
    ok = [d for d in deliveries if isinstance(d, ResultDelivery) and d.result.status is Status.OK]
    return [d.result_id for d in ok if d.result.score is not None]


def ingestion_posts(server: FakeLangfuseServer) -> list[int]:
    """The number of events in each `POST /ingestion`, in order."""
    return [len(r.body["batch"]) for r in server.requests if r.endpoint == "POST /api/public/ingestion"]


async def test_a_batch_of_results_is_one_request_and_reviews_go_after_it(worker: Worker) -> None:
    """The outbox hands the sink its due results together: every score of the round is one
    `score-create` event, MAX_REQUEST_SCORES to a request, and the review items are routed after
    the scores."""
    server = worker.server
    await worker.pipeline.tick(settle_all=True, deliver=False)
    due = await outbox_deliveries(worker.store, "langfuse")
    scored = written(due)
    assert len(scored) > 20 and any(isinstance(d, ReviewDelivery) for d in due)

    stats = await worker.pipeline.deliver()
    assert (stats.delivered, stats.failed, stats.retried) == (len(due), 0, 0)
    full, rest = divmod(len(scored), MAX_REQUEST_SCORES)
    assert ingestion_posts(server) == [MAX_REQUEST_SCORES] * full + [rest] * (rest > 0)
    first_queue_call = next(i for i, r in enumerate(server.requests) if "annotation-queues" in r.path)
    last_score_call = max(i for i, r in enumerate(server.requests) if r.endpoint == "POST /api/public/ingestion")
    assert last_score_call < first_queue_call
    await assert_scores_match(worker.store, server)
    await assert_routed_once(worker.store, server)
    server.assert_no_violations()


async def test_a_score_the_server_refuses_in_a_batch_is_parked_alone(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event of the batch gets a 400 inside the 207: the batch is tried again row by row, the
    refused score is parked with the server's reason and every other score lands once."""
    server = worker.server
    await worker.pipeline.tick(settle_all=True, deliver=False)
    due = await outbox_deliveries(worker.store, "langfuse", "result")
    scored = written(due)
    victim = scored[3]
    send = worker.sink.client.ingest

    async def spoil(events: list[dict[str, Any]]) -> dict[str, Any]:
        for event in events:  # a score with two targets, which the server refuses
            if event["body"]["id"] == victim:
                event["body"] = {**event["body"], "sessionId": "s-fail", "traceId": "t-x"}
        return await send(events)

    monkeypatch.setattr(worker.sink.client, "ingest", spoil)
    stats = await worker.pipeline.deliver()
    assert (stats.failed, stats.retried) == (1, 0)
    # the first request holds the refused score; then every score of the batch goes alone
    assert ingestion_posts(server) == [MAX_REQUEST_SCORES] + [1] * len(scored)
    assert {r.id for r in server.scores} == set(scored) - {victim}
    assert Counter(r.id for r in server.scores).most_common(1)[0][1] == 1
    violations = server.take_violations()
    assert len(violations) == 2 and all("exactly one target" in v for v in violations)
    server.assert_no_violations()


async def test_a_transient_error_inside_a_batch_retries_it_whole(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event answered 503 inside the 207 and another 400: the batch is retried later as a
    whole (nothing parked), and then every score lands once: the scores the first attempt wrote are
    upserted, not duplicated."""
    server = worker.server
    await worker.pipeline.tick(settle_all=True, deliver=False)
    results = len(await outbox_deliveries(worker.store, "langfuse", "result"))
    reviews = len(await outbox_deliveries(worker.store, "langfuse", "review"))
    send = worker.sink.client.ingest

    async def flaky(events: list[dict[str, Any]]) -> dict[str, Any]:
        answer = await send(events[2:])
        failed = [
            {"id": e["id"], "status": s, "message": "try later"} for e, s in zip(events[:2], (400, 503), strict=True)
        ]
        return {"successes": answer["successes"], "errors": answer["errors"] + failed}

    monkeypatch.setattr(worker.sink.client, "ingest", flaky)
    first = await worker.pipeline.deliver()
    assert (first.delivered, first.failed, first.retried) == (reviews, 0, results)
    monkeypatch.undo()
    worker.pipeline.clock = lambda: time.time() + 60  # past the backoff
    second = await worker.pipeline.deliver()
    assert second.failed == 0 and second.retried == 0 and await worker.store.outbox_backlog() == 0
    await assert_scores_match(worker.store, server)
    assert any(w.replaced for w in server.score_requests)
    server.assert_no_violations()
