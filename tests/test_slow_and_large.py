"""Slow clients, large requests and the event loop (issue 14, items 2, 3, 5 and 7), over a real uvicorn
server in this process, on SQLite and PostgreSQL.

- Idle uploads (headers sent, body never) do not count as requests in progress: normal requests go
  through while they wait, and each is answered 408 after `body_timeout_seconds`, holding nothing.
- A large request is decoded off the event loop: `/healthz` is answered again and again while it is
  decoded and stored.
- The memory budget (`max_inflight_bytes`) is never exceeded, refusals are 503 with Retry-After, and
  an exporter that resends gets everything in.
- Multi-member gzip is inflated in linear work.
- A request head over 16 KiB is 431 even when it arrives in one read.

Deadlines below are liveness guards only (a hung test fails instead of hanging), never speed checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from google.rpc import status_pb2

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, minimal_spans, trace_request
from tracing_eval import server as http_server
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp import decode
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.store.sql import SqlStore

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
PB = {"content-type": "application/x-protobuf"}
LIVENESS_SECONDS = 120.0


def turn(conversation: str) -> bytes:
    return trace_request(genai_turn_spans(conversation, "Where is my order?", "It ships tomorrow.")).SerializeToString()


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(rx: OtlpReceiver) -> AsyncIterator[str]:
    """The worker's HTTP app (health, receiver) under uvicorn on a free port; yields its base URL."""
    sock = http_server.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(http_server.http_app(rx.routes()), log_level="warning", lifespan="off", access_log=False)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started, "uvicorn started")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, LIVENESS_SECONDS)
        rx.intake.close()


async def eventually(check: Any, what: str) -> None:
    deadline = time.monotonic() + LIVENESS_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"liveness guard: {what} never happened"
        await asyncio.sleep(0.01)


async def idle_upload(port: int, declared: int = 1000) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sends a request's headers and none of its body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {declared}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


async def test_idle_uploads_hold_no_slot_and_get_408_after_the_body_timeout(store: SqlStore) -> None:
    settings = ReceiverSettings(body_timeout_seconds=2.0)  # max_pending_requests: the default 64
    rx = OtlpReceiver(store, settings)
    async with serving(rx) as base:
        port = int(base.rsplit(":", 1)[1])
        idle = [await idle_upload(port) for _ in range(settings.max_pending_requests)]
        async with httpx.AsyncClient(base_url=base, timeout=LIVENESS_SECONDS) as c:
            answers = [await c.post("/v1/traces", content=turn(f"conv-{i}"), headers=PB) for i in range(5)]
        assert [r.status_code for r in answers] == [200] * 5  # the idle uploads are not "in progress"
        for reader, writer in idle:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), LIVENESS_SECONDS)
            assert head.startswith(b"HTTP/1.1 408 "), head
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            status = status_pb2.Status()
            status.ParseFromString(await reader.readexactly(length))
            assert status.code == 4 and "the body did not arrive within 2 s (0 bytes received)" in status.message
            writer.close()
    assert rx.counters.rejected == {"body_timeout": settings.max_pending_requests}
    assert rx.intake.budget.used == 0 and rx.pending == 0
    assert await store.thread_keys() == [f"otlp:conv-{i}" for i in range(5)]


async def test_healthz_is_answered_while_a_large_request_is_decoded_and_stored(store: SqlStore) -> None:
    body = minimal_spans(60_000)  # 10 chunks of canonical spans, each stored on its own
    rx = OtlpReceiver(store, ReceiverSettings())
    async with serving(rx) as base, httpx.AsyncClient(base_url=base, timeout=LIVENESS_SECONDS) as c:
        big = asyncio.create_task(c.post("/v1/traces", content=body, headers=PB))
        await eventually(lambda: rx.pending == 1 or big.done(), "the large request is in progress")
        answered_during = 0
        while not big.done():
            assert (await c.get("/healthz")).status_code == 200
            answered_during += not big.done()
        assert (await big).status_code == 200
    assert answered_during >= 3, "the event loop was held while the request was decoded"
    assert rx.counters.spans == 60_000 and len(await store.thread_keys()) == 6_000


async def test_the_memory_budget_holds_and_an_exporter_that_resends_gets_everything_in(store: SqlStore) -> None:
    settings = ReceiverSettings(max_body_bytes=400_000, max_inflight_bytes=800_000, retry_after_seconds=1)
    rx = OtlpReceiver(store, settings)
    bodies = [minimal_spans(9_000, seed=k) for k in range(8)]  # about 330 KB each
    assert all(300_000 < len(b) < settings.max_body_bytes for b in bodies)
    refusals: list[httpx.Response] = []
    async with serving(rx) as base, httpx.AsyncClient(base_url=base, timeout=LIVENESS_SECONDS) as c:

        async def export(body: bytes) -> None:  # as an exporter does: resend after Retry-After
            while (r := await c.post("/v1/traces", content=body, headers=PB)).status_code != 200:
                refusals.append(r)
                await asyncio.sleep(float(r.headers["retry-after"]) / 10)

        await asyncio.wait_for(asyncio.gather(*(export(b) for b in bodies)), LIVENESS_SECONDS)
    assert refusals, "eight requests of 330 KB at once must not all fit in 800 KB"
    for r in refusals:
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        status = status_pb2.Status()
        status.ParseFromString(r.content)
        assert status.code == 14 and "max_inflight_bytes is 800000" in status.message
    assert rx.intake.budget.peak <= settings.max_inflight_bytes and rx.intake.budget.used == 0
    assert rx.counters.spans == 8 * 9_000 and len(await store.thread_keys()) == 8 * 900


async def test_a_request_head_over_16_kib_is_refused_even_in_one_read(store: SqlStore) -> None:
    rx = OtlpReceiver(store, ReceiverSettings())
    async with serving(rx) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as s:
            body = turn("big-head")
            head = (
                f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                f"X-Padding: {'a' * 17_000}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            await asyncio.to_thread(s.sendall, head + body)  # the whole request in one write
            answer = await asyncio.to_thread(s.recv, 65536)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        async with httpx.AsyncClient(base_url=base) as c:
            assert (await c.post("/v1/traces", content=turn("small-head"), headers=PB)).status_code == 200
    assert await store.thread_keys() == ["otlp:small-head"]


def test_gzip_of_many_members_is_inflated_in_linear_work(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """The review's repro: 1,000 zero bytes gzipped, the member repeated 8,000 and 32,000 times. zlib
    gets every input byte a bounded number of times (the old code handed it the rest of the body once
    per member: work that grows with the square of the body)."""
    fed = {"bytes": 0}
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args: Any) -> None:
            self.inner = real(*args)

        def decompress(self, data: Any, max_length: int = 0) -> bytes:
            fed["bytes"] += len(data)
            return self.inner.decompress(data, max_length)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(decode.zlib, "decompressobj", Counting)
    member = gzip.compress(b"\0" * 1000, mtime=0)
    for members in (8_000, 32_000):
        fed["bytes"] = 0
        body = member * members
        assert decode.decompress(body, "gzip", 64 * 1024 * 1024) == b"\0" * 1000 * members
        assert fed["bytes"] <= 3 * len(body), (members, fed["bytes"], len(body))
