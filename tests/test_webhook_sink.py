"""The webhook sink against a loopback receiver that checks signatures and counts deliveries."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import EXAMPLES
from tests.support.fakes.loopback import LoopbackServer
from tests.support.results import score_result
from tracing_eval.config import ConfigError, ReviewSettings, RouteSettings, Settings
from tracing_eval.connectors.otlp.file_source import OtlpFileSource
from tracing_eval.connectors.review.settings import WebhookSettings
from tracing_eval.connectors.review.webhook import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookError,
    WebhookSink,
    verify,
)
from tracing_eval.delivery import Anchor, ReviewDelivery
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.model import Scope, Span
from tracing_eval.pipeline import Pipeline
from tracing_eval.routing import route
from tracing_eval.sinks import deliver_outbox
from tracing_eval.store import schema
from tracing_eval.store.base import IngestBatch, Outgoing, Readiness, ReviewRequest
from tracing_eval.store.sql import SqlStore

SECRET = "hook-secret"
LATER = 10**10  # a tick time past any backoff


@dataclass
class Receiver:
    """POST /hook/{name}: answers scripted statuses (per name) first, then 200; dedupes by delivery id."""

    statuses: dict[str, list[int]] = field(default_factory=dict)
    delays: dict[str, list[float]] = field(default_factory=dict)
    posts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (name, delivery id) -> POSTs seen
    processed: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # first accepted body
    bad_signatures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def hook(self, request: Request) -> Response:
        name = request.path_params["name"]
        body = await request.body()
        if not verify(SECRET, body, request.headers.get(SIGNATURE_HEADER)):
            with self.lock:
                self.bad_signatures += 1
            return Response("bad signature", status_code=401)
        delivery = request.headers[DELIVERY_HEADER]
        doc = orjson.loads(body)
        assert doc["delivery_id"] == delivery and str(doc["sent_at"]) == request.headers[TIMESTAMP_HEADER]
        with self.lock:
            self.posts[(name, delivery)] += 1
            status = self.statuses.get(name, []).pop(0) if self.statuses.get(name) else 200
            delay = self.delays.get(name, []).pop(0) if self.delays.get(name) else 0.0
            if status == 200:
                self.processed.setdefault((name, delivery), doc)  # idempotent on the delivery id
        if delay:
            await asyncio.sleep(delay)
        return Response(status_code=status)

    def processed_ids(self, name: str = "a") -> list[str]:
        return sorted(d for n, d in self.processed if n == name)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    r = Receiver()
    with LoopbackServer(Starlette(routes=[Route("/hook/{name}", r.hook, methods=["POST"])])) as server:
        yield r, server.url


def hook_settings(base: str, *names: str, timeout: float = 5.0) -> WebhookSettings:
    return WebhookSettings(urls=[f"{base}/hook/{n}" for n in names], secret=SECRET, timeout_seconds=timeout)


REVIEW = ReviewSettings(routes=[RouteSettings(name="quality", destinations=["local", "webhook"], priority="high")])


async def route_thread(store: SqlStore, conv: str, turn: int, now: float) -> None:
    """Ingest one more turn of `conv`, claim the thread and record a failing result routed to the webhook."""
    trace_id = hashlib.sha256(f"{conv}/{turn}".encode()).hexdigest()[:32]
    span = Span(trace_id=trace_id, span_id=f"{turn + 1:016x}", name="invoke_agent", start_ns=turn + 1)
    await store.ingest(IngestBatch(spans=[span], conversations={trace_id: conv}), now)
    [claim] = await store.claim("w", now + 1, Readiness(0, 0), 10, 60)
    results = [score_result("task_success", 0.2, threshold=0.7, reason="goal not met")]
    decision = route(results, REVIEW, review_sinks={"webhook"})
    assert decision is not None
    anchor = Anchor(trace_id=trace_id, span_id=span.span_id, conversation_id=conv, start_ns=span.start_ns)
    review = ReviewRequest(decision.reasons, decision.sinks, decision.local, decision.payload_fields(), anchor)
    assert await store.record(claim, [], review, [], now + 1)


def review_item(**fields: Any) -> ReviewDelivery:
    """A review item as the pipeline builds it (routing decision, anchor) and the store numbers it."""
    r = score_result("tool_errors", 0.0, threshold=0.7, scope=Scope.TURN, turn_index=2, reason="cancel failed")
    decision = route([r], REVIEW, review_sinks={"webhook"})
    assert decision is not None
    anchor = Anchor(trace_id="ab" * 16, span_id="cd" * 8, response_id="resp-1", conversation_id="conv-1", start_ns=9)
    request = ReviewRequest(
        decision.reasons, decision.sinks, decision.local, {**decision.payload_fields(), **fields}, anchor
    )
    return request.delivery(7, "otlp:conv-1", 4)


async def test_posts_a_signed_review_item(receiver: tuple[Receiver, str]) -> None:
    r, base = receiver
    sink = WebhookSink(hook_settings(base, "a"), clock=lambda: 1_800_000_000.5)
    result = score_result("m", 1.0, threshold=0.5)
    await sink.deliver(Outgoing("x", "thread", result).delivery("otlp:conv-1", 4))  # results are not for this sink
    await sink.deliver(review_item(destinations=["local"]))  # routed elsewhere
    assert not r.posts
    await sink.deliver(review_item())
    await sink.aclose()

    assert r.bad_signatures == 0
    doc = r.processed[("a", "otlp:conv-1@4")]
    assert doc == {
        "type": "tracing_eval.review",
        "delivery_id": "otlp:conv-1@4",
        "sent_at": 1_800_000_000,
        "review_id": 7,
        "thread": {
            "key": "otlp:conv-1",
            "version": 4,
            "conversation_id": "conv-1",
            "last_trace_id": "ab" * 16,
            "last_span_id": "cd" * 8,
            "last_response_id": "resp-1",
        },
        "priority": "high",
        "routes": ["quality"],
        "failed_metrics": ["tool_errors"],
        "reasons": [
            {
                "metric": "tool_errors",
                "target": "turn 2",
                "score": 0.0,
                "threshold": 0.7,
                "label": None,
                "status": "ok",
                "reason": "cancel failed",
                "route": "quality",
                "routes": ["quality"],
                "priority": "high",
            }
        ],
        "links": {},
    }


async def test_flaky_receiver_gets_each_thread_version_once(receiver: tuple[Receiver, str], store: SqlStore) -> None:
    r, base = receiver
    r.statuses["a"] = [500, 429]
    sink = WebhookSink(hook_settings(base, "a"))
    await route_thread(store, "conv-1", 0, now=100.0)

    first = await deliver_outbox(store, [sink], now=200.0, max_attempts=5)
    second = await deliver_outbox(store, [sink], now=LATER, max_attempts=5)
    third = await deliver_outbox(store, [sink], now=LATER + 10**6, max_attempts=5)
    assert (first.retried, second.retried, third.delivered) == (1, 1, 1)
    assert await deliver_outbox(store, [sink], now=LATER * 2, max_attempts=5) == type(third)()  # nothing left

    await route_thread(store, "conv-1", 1, now=300.0)  # the thread grew: version 2 is routed again
    await deliver_outbox(store, [sink], now=LATER * 2, max_attempts=5)
    await sink.aclose()
    assert r.processed_ids() == ["otlp:conv-1@1", "otlp:conv-1@2"]
    assert r.posts[("a", "otlp:conv-1@1")] == 3 and r.posts[("a", "otlp:conv-1@2")] == 1
    assert r.processed[("a", "otlp:conv-1@2")]["priority"] == "high"  # from the reasons' routes


async def test_client_errors_are_parked_not_retried(receiver: tuple[Receiver, str], store: SqlStore) -> None:
    r, base = receiver
    r.statuses["a"] = [400]
    sink = WebhookSink(hook_settings(base, "a"))
    await route_thread(store, "conv-1", 0, now=100.0)
    stats = await deliver_outbox(store, [sink], now=200.0, max_attempts=5)
    assert (stats.failed, stats.retried) == (1, 0)
    assert await store.outbox_backlog() == 0
    await deliver_outbox(store, [sink], now=LATER, max_attempts=5)
    await sink.aclose()
    assert r.posts[("a", "otlp:conv-1@1")] == 1 and not r.processed


async def test_wrong_secret_is_a_permanent_failure(receiver: tuple[Receiver, str], store: SqlStore) -> None:
    r, base = receiver
    sink = WebhookSink(WebhookSettings(urls=[f"{base}/hook/a"], secret="not-the-secret"))
    await route_thread(store, "conv-1", 0, now=100.0)
    stats = await deliver_outbox(store, [sink], now=200.0, max_attempts=5)
    await sink.aclose()
    assert stats.failed == 1 and r.bad_signatures == 1


async def test_restart_does_not_redeliver_what_was_delivered(
    receiver: tuple[Receiver, str], settings: Settings, store: SqlStore
) -> None:
    r, base = receiver
    await route_thread(store, "conv-1", 0, now=100.0)
    await route_thread(store, "conv-2", 0, now=100.0)
    r.statuses["a"] = [200, 503]  # conv-1 goes through, conv-2 fails
    sink = WebhookSink(hook_settings(base, "a"))
    await deliver_outbox(store, [sink], now=200.0, max_attempts=5)
    await sink.aclose()
    await store.close()  # the process stops with conv-2 pending

    again = SqlStore(settings.store.url)
    await again.open()
    sink = WebhookSink(hook_settings(base, "a"))
    stats = await deliver_outbox(again, [sink], now=LATER, max_attempts=5)
    await sink.aclose()
    await again.close()
    assert stats.delivered == 1
    assert r.posts == Counter({("a", "otlp:conv-1@1"): 1, ("a", "otlp:conv-2@1"): 2})
    assert r.processed_ids() == ["otlp:conv-1@1", "otlp:conv-2@1"]


async def test_crash_after_the_post_is_absorbed_by_the_delivery_id(
    receiver: tuple[Receiver, str], settings: Settings, store: SqlStore
) -> None:
    """The receiver took the POST but the answer never came back (timeout, then a restart):
    the retry carries the same delivery id, so an idempotent receiver processes it once."""
    r, base = receiver
    r.delays["a"] = [1.0]
    await route_thread(store, "conv-1", 0, now=100.0)
    sink = WebhookSink(hook_settings(base, "a", timeout=0.2))
    stats = await deliver_outbox(store, [sink], now=200.0, max_attempts=5)
    await sink.aclose()
    await store.close()
    assert stats.retried == 1

    again = SqlStore(settings.store.url)
    await again.open()
    sink = WebhookSink(hook_settings(base, "a"))
    assert (await deliver_outbox(again, [sink], now=LATER, max_attempts=5)).delivered == 1
    await sink.aclose()
    await again.close()
    assert r.posts[("a", "otlp:conv-1@1")] == 2
    assert r.processed_ids() == ["otlp:conv-1@1"]


async def test_failing_example_threads_reach_the_webhook_once_across_a_restart(
    receiver: tuple[Receiver, str], settings: Settings, store: SqlStore
) -> None:
    """The examples through the real pipeline: every thread routed for review arrives once."""
    r, base = receiver
    r.statuses["a"] = [500, 503]
    sink = WebhookSink(hook_settings(base, "a"))
    source = OtlpFileSource(EXAMPLES / "otel-genai.otlp.jsonl", complete=True)
    pipeline = Pipeline(store, settings, build_metrics(settings), "test", sources=[source], sinks=[sink])
    stats = await pipeline.tick(settle_all=True)
    await sink.aclose()
    await store.close()
    assert stats.routed_to_review >= 2 and stats.delivery.retried == 2

    again = SqlStore(settings.store.url)
    await again.open()
    sink = WebhookSink(hook_settings(base, "a"))
    await deliver_outbox(again, [sink], now=LATER, max_attempts=5)
    await sink.aclose()
    items = await again.review_items()
    await again.close()
    assert r.processed_ids() == sorted(f"{i.thread_key}@{i.thread_version}" for i in items)
    assert sum(r.posts.values()) == len(items) + 2  # the two refused POSTs were the only repeats
    for item in items:
        doc = r.processed[("a", f"{item.thread_key}@{item.thread_version}")]
        assert doc["review_id"] == item.id and doc["reasons"] == item.reasons
        assert doc["thread"]["conversation_id"] == item.thread_key.removeprefix("otlp:")


async def test_several_urls_retry_only_the_ones_that_failed(receiver: tuple[Receiver, str], store: SqlStore) -> None:
    r, base = receiver
    r.statuses["b"] = [502]
    sink = WebhookSink(hook_settings(base, "a", "b"))
    await route_thread(store, "conv-1", 0, now=100.0)
    assert (await deliver_outbox(store, [sink], now=200.0, max_attempts=5)).retried == 1
    assert (await deliver_outbox(store, [sink], now=LATER, max_attempts=5)).delivered == 1
    await sink.aclose()
    assert r.posts == Counter({("a", "otlp:conv-1@1"): 1, ("b", "otlp:conv-1@1"): 2})
    assert r.processed_ids("a") == r.processed_ids("b") == ["otlp:conv-1@1"]


async def test_unreachable_url_is_retried() -> None:
    sink = WebhookSink(WebhookSettings(urls=["http://127.0.0.1:9/hook"], timeout_seconds=1.0))
    with pytest.raises(WebhookError):
        await sink.deliver(review_item())
    await sink.aclose()


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="at least one URL"):
        WebhookSink(WebhookSettings())
    with pytest.raises(ConfigError, match="not an http"):
        WebhookSink(WebhookSettings(urls=["ftp://example/hook"]))


async def test_a_token_in_the_webhook_url_path_stays_out_of_errors_logs_and_the_outbox(store: SqlStore) -> None:
    """Chat webhooks (Slack style) carry their token in the path: a failed delivery shows the host only."""
    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "T0000/B0000/XXXXsecretXXXX"
    sink = WebhookSink(WebhookSettings(urls=[f"http://127.0.0.1:{port}/services/{token}?key=qsecret"]))
    await store.ingest(IngestBatch(spans=[Span(trace_id="a" * 32, span_id="1" * 16, name="chat")]), 1.0)
    [claim] = await store.claim("w", 2.0, Readiness(0, 0), 10, 60)
    await store.record(claim, [], ReviewRequest([{"metric": "m"}], sinks=["webhook"]), [], 2.0)
    try:
        stats = await deliver_outbox(store, [sink], 3.0, max_attempts=5)
    finally:
        await sink.aclose()
    assert stats.retried == 1
    async with store.engine.connect() as conn:
        [error] = (await conn.execute(schema.outbox.select().with_only_columns(schema.outbox.c.last_error))).scalars()
    assert f"url 1 (http://127.0.0.1:{port}/…)" in error
    assert "secret" not in error and "services" not in error
