"""Months in minutes: the sidecar's receiver, ticks, deliveries and retention driven by a fake clock
through 90 simulated days of steady traffic. The store's size levels off once retention keeps pace,
while every thread is evaluated at its last version and every result reaches the sink."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from starlette.applications import Starlette
from starlette.routing import Route

from tests.support.fakes.loopback import LoopbackServer
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.test_otlp_sink import Collector
from tests.test_retention import Clock
from tracing_eval.app import build_pipeline
from tracing_eval.config import Settings
from tracing_eval.server import http_app
from tracing_eval.store import schema as t
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry
from tracing_eval.worker import Worker

DAY = 86400.0
DAYS = 90
STEPS_PER_DAY = 4  # the clock moves 6 hours per step
NEW_PER_STEP = 2  # conversations started per step: 8 a day
TURNS = 3  # one turn per step, so a conversation spans three steps


def turn_body(conv: str, i: int, history: list[dict[str, Any]]) -> bytes:
    user, answer = f"{conv}: where is order A{i}? I asked before.", f"Order A{i} of {conv} ships on day {i + 1}."
    body = trace_request(genai_turn_spans(conv, user, answer, history)).SerializeToString()
    history += [
        {"role": "user", "parts": [{"type": "text", "content": user}]},
        {"role": "assistant", "parts": [{"type": "text", "content": answer}]},
    ]
    return body


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Collector, str]]:
    """An OTLP `/v1/logs` endpoint for the evaluation events (the environment's OTLP settings unset)."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    c = Collector()
    with LoopbackServer(Starlette(routes=[Route("/v1/logs", c.logs, methods=["POST"])])) as server:
        yield c, server.url


async def test_ninety_days_the_store_levels_off_and_everything_is_evaluated_and_delivered(
    settings: Settings, collector: tuple[Collector, str]
) -> None:
    sink, url = collector
    settings.sinks.otlp.endpoint = url
    settings.metrics.enabled = ["repetition", "reask", "tool_errors", "response_hygiene", "thread_stats"]
    settings.retention.spans_days, settings.retention.results_days = 5.0, 20.0
    settings.retention.outbox_days, settings.retention.review_days = 2.0, 10.0
    clock = Clock(1_800_000_000.0)
    store = SqlStore(settings.store.url)
    await store.open()
    telemetry = Telemetry()
    pipeline = build_pipeline(settings, store, [], ["local", "otlp"], complete=False, telemetry=telemetry)
    pipeline.clock = clock
    from tracing_eval.connectors.otlp.receiver import OtlpReceiver

    receiver = OtlpReceiver(store, settings.receiver, clock=clock, telemetry=telemetry, sinks=pipeline.outbox_sinks)
    worker = Worker(settings, pipeline)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(http_app(receiver.routes(), worker)), base_url="http://sidecar"
    )
    open_convs: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    versions: dict[str, int] = {}  # thread -> its last version seen before retention could delete it
    sizes: list[int] = []
    started = 0
    try:
        for day in range(DAYS):
            for _ in range(STEPS_PER_DAY):
                for _ in range(NEW_PER_STEP):
                    open_convs[f"conv-{started:05d}"] = (0, [])
                    started += 1
                bodies = []
                for conv, (i, history) in list(open_convs.items()):
                    bodies.append(turn_body(conv, i, history))
                    open_convs[conv] = (i + 1, history)
                    if i + 1 == TURNS:
                        del open_convs[conv]
                for body in bodies:
                    r = await client.post(
                        "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
                    )
                    assert r.status_code == 200, r.text
                clock.now += DAY / STEPS_PER_DAY
                await worker.tick()
                await worker.deliver()
            versions.update({s["key"]: s["version"] for s in await store.thread_states()})
            delivered = {e.attributes["tracing_eval.result.id"] for e in sink.events}
            assert {r.id for r in await store.results()} <= delivered, f"day {day}: a result was not delivered"
            await worker.retain()
            sizes.append((await store.size())[0])
        clock.now += DAY  # the last conversations go idle
        await worker.tick()
        await worker.deliver()
        versions.update({s["key"]: s["version"] for s in await store.thread_states()})

        # every thread was evaluated at its last version, and every result of it was delivered
        states = await store.thread_states()
        assert all(s["evaluated_version"] == s["version"] for s in states)
        evaluated = {
            (e.attributes["tracing_eval.thread.key"], e.attributes["tracing_eval.thread.version"])
            for e in sink.events
            if e.attributes["gen_ai.evaluation.name"] == "thread_stats"
        }
        assert len(versions) == started == DAYS * STEPS_PER_DAY * NEW_PER_STEP
        assert {(key, v) for key, v in versions.items()} <= evaluated
        assert {r.id for r in await store.results()} <= {e.attributes["tracing_eval.result.id"] for e in sink.events}
        async with store.engine.connect() as conn:
            undelivered = select(func.count()).select_from(t.outbox).where(t.outbox.c.delivered_at.is_(None))
            assert (await conn.execute(undelivered)).scalar() == 0
        assert 'tracing_eval_retention_deleted_total{table="spans"}' in (await client.get("/metrics")).text

        # the size levels off: once retention keeps pace (after results_days) it grows by a small
        # fraction of what the first two weeks added per day
        growth_early = (sizes[14] - sizes[0]) / 14
        growth_late = (sizes[DAYS - 1] - sizes[44]) / (DAYS - 45)
        assert growth_late < 0.1 * growth_early, sizes
        assert max(sizes[45:]) < 1.15 * max(sizes[25:45]), sizes
    finally:
        await client.aclose()
        await pipeline.close()
        receiver.intake.close()
        await store.close()
    print("store size by day (MiB):", [round(s / 2**20, 2) for s in sizes])
