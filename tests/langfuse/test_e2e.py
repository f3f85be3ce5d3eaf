"""Source, pipeline and sink against the fake Langfuse server, in v4 and v3 mode.

Every test seeds sessions in the fake, pulls them into a real SQLite store, runs pipeline ticks
with everything settled, and checks what the fake holds: each expected score exactly once, on the
right target, with value, comment, config and a fixed timestamp; queue items once per thread.
Each test ends with `server.assert_no_violations()` (every request matched the OpenAPI spec).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.langfuse_harness import (
    OK_TURNS,
    QUEUE,
    Worker,
    assert_reads_bounded,
    assert_routed_once,
    assert_scores_match,
    lf_settings,
    scored_results,
    seed_standard,
)
from tracing_eval.config import Settings
from tracing_eval.connectors.langfuse.configs import REVIEW_CONFIG
from tracing_eval.delivery import Delivery
from tracing_eval.sinks import BaseSink


async def test_pull_score_and_route_once(worker: Worker, server: FakeLangfuseServer):
    seed_standard(server)
    await worker.settle()

    assert await worker.store.thread_keys() == ["langfuse:s-fail", "langfuse:s-ok"]  # our own traffic stays out
    await assert_scores_match(worker.store, server)
    assert {r.name for r in server.scores} >= {"reask", "user_friction", "tool_errors", "response_hygiene"}
    assert all(w.endpoint == "POST /api/public/ingestion" for w in server.score_requests)  # the upserting path
    kinds = {c.name: c.data_type for c in server.score_configs}
    assert kinds["refusal_loop"] == "CATEGORICAL" and kinds["reask"] == "NUMERIC"  # verdict scale vs. plain score
    assert {r.string_value for r in server.scores if r.name == "refusal_loop"} == {"none"}

    [queue] = server.queues
    assert queue.name == QUEUE
    config_names = {c.id: c.name for c in server.score_configs}
    queue_configs = {config_names[i] for i in queue.score_config_ids}
    assert queue_configs >= {REVIEW_CONFIG, "reask"} and "user_friction" not in queue_configs  # advisory: scored only
    assert [(i.object_type, i.object_id, i.status) for i in server.queue_items] == [("SESSION", "s-fail", "PENDING")]
    [comment] = server.comments
    assert comment.object_type == "SESSION" and "`reask`" in comment.content
    assert "`user_friction`" not in comment.content  # written as a score, but it routes nothing on its own
    await assert_routed_once(worker.store, server)

    # every read was bounded by time; the generation was probed once
    assert_reads_bounded(server)
    assert server.count("GET /api/public/health") == 1
    if server.mode == "v4":
        assert server.count("GET /api/public/traces") == 0
    else:
        assert server.count("GET /api/public/v2/observations") == 1  # the probe (404) only
    server.assert_no_violations()


async def test_restart_and_redelivery_do_not_duplicate(worker: Worker, server: FakeLangfuseServer):
    seed_standard(server)
    delivered: list[Delivery] = []
    inner = worker.sink

    class Recording(BaseSink):
        name = inner.name

        async def deliver(self, delivery: Delivery) -> None:
            await inner.deliver(delivery)
            delivered.append(delivery)

    worker.pipeline.sinks = [Recording()]
    await worker.settle()
    writes, rows = len(server.score_requests), len(server.scores)
    assert delivered and rows == len(await scored_results(worker.store))

    await worker.restart()  # a new store object on the same file, new source and sink
    await worker.settle()
    assert len(server.score_requests) == writes  # nothing re-read as new, nothing re-sent
    assert worker.source.state_key == f"langfuse:127.0.0.1:{server.base_url.rsplit(':', 1)[1]}:{server.public_key}"

    server.advance(timedelta(days=1, hours=12))  # the outbox delivers at least once: again, on another day
    for delivery in delivered:
        await worker.sink.deliver(delivery)
    assert len(server.scores) == rows
    assert all(w.replaced for w in server.score_requests[writes:])  # same id, name and date: upserted
    await assert_scores_match(worker.store, server)
    await assert_routed_once(worker.store, server)
    assert len(server.queue_items) == 1 and len(server.comments) == 1
    server.assert_no_violations()


async def test_grown_thread_resends_only_changed_scores(worker: Worker, server: FakeLangfuseServer):
    seed_standard(server)
    await worker.settle()
    before = {r.id: r.result.model_dump(exclude={"duration_ms"}) for r in await scored_results(worker.store)}
    writes = len(server.score_requests)

    new = server.add_trace_to_session(
        "s-fail", "4411!!! I told you three times.", "Could you tell me your order number?"
    )
    await worker.settle()

    after = {r.id: r.result.model_dump(exclude={"duration_ms"}) for r in await scored_results(worker.store)}
    changed = {k for k, v in after.items() if before.get(k) != v}
    resent = Counter(w.score_id for w in server.score_requests[writes:])
    assert set(resent) == changed and set(resent.values()) == {1}
    assert any(w.body.get("traceId") == new.id for w in server.score_requests[writes:])  # the new turn is scored
    old_turns = {k for k, v in before.items() if v["turn_index"] is not None}
    assert not old_turns & set(resent)  # unchanged turns are not re-sent
    await assert_scores_match(worker.store, server)

    versions = sorted(r.thread_version for r in await worker.store.review_items(status=None))
    assert versions == [1, 2]  # failed again at version 2
    assert len(server.queue_items) == 1  # the pending item is reused ...
    assert len(server.comments) == 2  # ... and the new version says why in its own comment
    await assert_routed_once(worker.store, server)
    server.assert_no_violations()


async def test_rate_limits_errors_and_hangs_still_deliver_once(settings: Settings, server: FakeLangfuseServer):
    seed_standard(server)
    server.fail_next(2, status=429, retry_after=1, path="/api/public/v2/observations")
    server.fail_next(2, status=429, retry_after=1, path="/api/public/traces")
    server.fail_next(1, status=429, retry_after=1, path="/api/public/ingestion")
    server.fail_next(1, status=503, path="/api/public/ingestion")
    server.hang_next(1, seconds=3, path="/api/public/annotation-queues")
    server.set_failure_rate(0.25, seed=7, statuses=(500, 502, 503))
    worker = await Worker(settings, server, lf_settings(server, timeout_seconds=1, max_retries=3)).start()
    try:
        await worker.settle(max_ticks=60)
        server.set_failure_rate(0.0)
        await assert_scores_match(worker.store, server)
        await assert_routed_once(worker.store, server)
        assert len(server.queue_items) == 1
        statuses = Counter(r.status for r in server.requests)
        assert statuses[429] >= 3 and statuses[500] + statuses[502] + statuses[503] >= 5 and statuses[499] == 1
    finally:
        await worker.stop()
    server.assert_no_violations()


async def test_retry_after_is_honoured(worker: Worker, server: FakeLangfuseServer):
    server.seed_session("s-ok", OK_TURNS)
    server.fail_next(1, status=429, retry_after=1, path="/api/public/ingestion")
    await worker.settle()
    posts = [r for r in server.requests if r.endpoint == "POST /api/public/ingestion"]
    assert posts[0].status == 429 and posts[1].received_at - posts[0].received_at >= 0.95
    await assert_scores_match(worker.store, server)
    server.assert_no_violations()


async def test_ingestion_lag_is_covered_by_the_overlap(settings: Settings, server: FakeLangfuseServer):
    server.seed_session("s-late", OK_TURNS, visible_after=120)
    worker = await Worker(settings, server, lf_settings(server)).start()
    try:
        await worker.settle()
        assert await worker.store.thread_keys() == []  # not readable yet
        server.advance(150)
        await worker.settle()
        assert await worker.store.thread_keys() == ["langfuse:s-late"]
        await assert_scores_match(worker.store, server)
    finally:
        await worker.stop()
    server.assert_no_violations()


async def test_without_overlap_late_data_is_missed(settings: Settings, server: FakeLangfuseServer, tmp_path):
    server.seed_session("s-late", OK_TURNS, visible_after=120)
    settings = settings.model_copy(
        update={"store": settings.store.model_copy(update={"url": f"sqlite+aiosqlite:///{tmp_path / 'blind.db'}"})}
    )
    worker = await Worker(settings, server, lf_settings(server, overlap_seconds=0)).start()
    try:
        await worker.settle()
        server.advance(150)
        await worker.settle()
        assert await worker.store.thread_keys() == []  # why the overlap window exists
    finally:
        await worker.stop()
    server.assert_no_violations()


async def test_a_trace_without_session_is_its_own_thread(worker: Worker, server: FakeLangfuseServer):
    [trace] = server.seed_session(
        None, [("What is my balance?", "Your balance is {{balance}}. Lorem ipsum TODO", None, None)]
    )
    await worker.settle()
    assert await worker.store.thread_keys() == [f"langfuse:trace:{trace.id}"]
    await assert_scores_match(worker.store, server)
    hygiene = [r for r in server.scores if r.name == "response_hygiene"]
    assert trace.root is not None
    assert Counter((r.trace_id, r.observation_id, r.session_id) for r in hygiene) == Counter(
        [(trace.id, trace.root.id, None), (trace.id, None, None)]  # the turn and the (one-turn) thread
    )
    assert [(i.object_type, i.object_id) for i in server.queue_items] == [("TRACE", trace.id)]
    await assert_routed_once(worker.store, server)
    server.assert_no_violations()
