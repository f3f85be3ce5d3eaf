"""The OTLP/HTTP receiver in process: encodings, status codes, auth, and durable acknowledgement."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from pydantic import SecretStr
from starlette.applications import Starlette

from tests.support.otlp_payloads import details_log_request, genai_turn_spans, to_otlp_json, trace_request
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.store.sql import SqlStore

PB = {"content-type": "application/x-protobuf"}
JS = {"content-type": "application/json"}


def client(receiver: OtlpReceiver) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=Starlette(routes=receiver.routes())), base_url="http://receiver"
    )


@pytest.fixture
def spans() -> Any:
    return genai_turn_spans("conv-1", "Where is my order A48213?", "It ships tomorrow.")


async def test_protobuf_gzip_and_json_are_stored_and_answered_in_kind(store: SqlStore, spans: Any) -> None:
    rx = OtlpReceiver(store, ReceiverSettings())
    body = trace_request(spans).SerializeToString()
    async with client(rx) as c:
        r1 = await c.post("/v1/traces", content=body, headers=PB)
        r2 = await c.post("/v1/traces", content=gzip.compress(body), headers={**PB, "content-encoding": "gzip"})
        r3 = await c.post("/v1/traces", content=json.dumps(to_otlp_json(trace_request(spans))), headers=JS)
    assert [r.status_code for r in (r1, r2, r3)] == [200, 200, 200]
    assert r1.headers["content-type"] == "application/x-protobuf" and r3.headers["content-type"] == "application/json"
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r1.content)
    assert not resp.HasField("partial_success")
    assert r3.json() == {}
    assert await store.thread_keys() == ["otlp:conv-1"]
    [trace] = await store.load_traces("otlp:conv-1")
    assert len(trace) == 2  # the same two spans three times: stored once
    assert (await store.thread_states())[0]["version"] == 1  # resends change nothing


async def test_logs_are_joined_to_spans(store: SqlStore, spans: Any) -> None:
    rx = OtlpReceiver(store, ReceiverSettings())
    chat = next(s for s in spans if s.name.startswith("chat"))
    async with client(rx) as c:
        assert (
            await c.post("/v1/traces", content=trace_request(spans).SerializeToString(), headers=PB)
        ).status_code == 200
        logs = details_log_request(chat.context.trace_id, chat.context.span_id, "hi", "hello")
        r = await c.post("/v1/logs", content=logs.SerializeToString(), headers=PB)
    assert r.status_code == 200
    [trace] = await store.load_traces("otlp:conv-1")
    loaded = next(s for s in trace if s.name.startswith("chat"))
    assert [e.name for e in loaded.events] == ["gen_ai.client.inference.operation.details"]
    assert rx.counters.events == 1


@pytest.mark.parametrize(
    ("body", "headers", "status", "needle"),
    [
        (b"\x0a\xff\xff\xff", PB, 400, "not a valid ExportTraceServiceRequest"),
        (b"{not json", JS, 400, "not valid JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00"}]}]}]}',
            JS,
            400,
            "not a hex string",
        ),
        (b'{"resourceSpans": "nope"}', JS, 400, "does not match"),
        (b"\x1f\x8b\x08garbage", {**PB, "content-encoding": "gzip"}, 400, "not valid gzip"),
        (b"x", {**PB, "content-encoding": "br"}, 400, "unsupported Content-Encoding"),
    ],
)
async def test_malformed_payloads_get_400_with_a_message_and_store_nothing(
    store: SqlStore, body: bytes, headers: dict[str, str], status: int, needle: str
) -> None:
    rx = OtlpReceiver(store, ReceiverSettings())
    async with client(rx) as c:
        r = await c.post("/v1/traces", content=body, headers=headers)
    assert r.status_code == status
    if headers["content-type"] == "application/json":
        assert needle in r.json()["message"]
    else:
        st = status_pb2.Status()
        st.ParseFromString(r.content)
        assert needle in st.message and st.code == 3
    assert await store.thread_keys() == []
    assert rx.counters.rejected == {"bad_payload": 1}


async def test_unsupported_content_type_is_415(store: SqlStore) -> None:
    async with client(OtlpReceiver(store, ReceiverSettings())) as c:
        r = await c.post("/v1/traces", content=b"hello", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "unsupported Content-Type" in r.text


async def test_body_over_the_limit_is_413_before_and_after_decompression(store: SqlStore, spans: Any) -> None:
    rx = OtlpReceiver(store, ReceiverSettings(max_body_bytes=2000))
    bomb = gzip.compress(b"\0" * 1_000_000)
    async with client(rx) as c:
        big = await c.post("/v1/traces", content=b"x" * 5000, headers=PB)
        zipped = await c.post("/v1/traces", content=bomb, headers={**PB, "content-encoding": "gzip"})
        fine = await c.post("/v1/traces", content=trace_request(spans).SerializeToString(), headers=PB)
    assert (big.status_code, zipped.status_code, fine.status_code) == (413, 413, 200)


async def test_spans_with_bad_ids_are_rejected_partially(store: SqlStore, spans: Any) -> None:
    req = trace_request(spans)
    req.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"  # 2 bytes instead of 8
    async with client(OtlpReceiver(store, ReceiverSettings())) as c:
        r = await c.post("/v1/traces", content=req.SerializeToString(), headers=PB)
    assert r.status_code == 200
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r.content)
    assert resp.partial_success.rejected_spans == 1 and "spanId must be 8 bytes" in resp.partial_success.error_message
    [trace] = await store.load_traces("otlp:conv-1")
    assert len(trace) == 1


async def test_empty_request_is_success(store: SqlStore) -> None:
    async with client(OtlpReceiver(store, ReceiverSettings())) as c:
        r = await c.post("/v1/traces", content=b"", headers=PB)
        j = await c.post("/v1/traces", content=b"{}", headers=JS)
    assert (r.status_code, j.status_code) == (200, 200)


async def test_bearer_token_is_required_when_configured(store: SqlStore, spans: Any) -> None:
    rx = OtlpReceiver(store, ReceiverSettings(auth_token=SecretStr("s3cret")))
    body = trace_request(spans).SerializeToString()
    async with client(rx) as c:
        none = await c.post("/v1/traces", content=body, headers=PB)
        wrong = await c.post("/v1/traces", content=body, headers={**PB, "authorization": "Bearer nope"})
        right = await c.post("/v1/traces", content=body, headers={**PB, "authorization": "Bearer s3cret"})
    assert (none.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert await store.thread_keys() == ["otlp:conv-1"]


class FailingStore:
    """Fails every write; with `hold`, only once `release` is set."""

    def __init__(self, hold: bool = False) -> None:
        self.writing, self.release = asyncio.Event(), asyncio.Event()
        if not hold:
            self.release.set()

    async def ingest(self, batch: Any, now: float) -> Any:
        self.writing.set()
        await self.release.wait()
        raise OSError("disk full")


async def test_store_failure_is_503_with_retry_after_never_200(spans: Any) -> None:
    rx = OtlpReceiver(FailingStore(), ReceiverSettings(retry_after_seconds=7))  # type: ignore[arg-type]
    async with client(rx) as c:
        r = await c.post("/v1/traces", content=trace_request(spans).SerializeToString(), headers=PB)
    assert r.status_code == 503 and r.headers["retry-after"] == "7"


async def test_store_that_cannot_keep_up_gets_503_instead_of_queueing(spans: Any) -> None:
    settings = ReceiverSettings(max_concurrent_writes=1, write_timeout_seconds=0.05)
    store = FailingStore(hold=True)
    rx = OtlpReceiver(store, settings)  # type: ignore[arg-type]
    body = trace_request(spans).SerializeToString()
    async with client(rx) as c:
        first = asyncio.create_task(c.post("/v1/traces", content=body, headers=PB))
        await store.writing.wait()  # the one transaction is busy with the first request
        second = await c.post("/v1/traces", content=body, headers=PB)
        assert rx.counters.rejected == {"store_busy": 1}  # answered while the first write still runs
        store.release.set()
        first_response = await first
    assert (first_response.status_code, second.status_code) == (503, 503)
    assert rx.counters.rejected == {"store_busy": 1, "store_error": 1}


async def test_requests_that_wait_for_the_store_are_written_together(store: SqlStore) -> None:
    """Group commit: the requests that arrive while a transaction writes go into the next one, all of
    them, and each is answered 200 with what it sent once that one committed."""
    writes: list[int] = []
    gate = asyncio.Event()
    ingest = store.ingest

    async def counted(batch: Any, now: float) -> Any:
        writes.append(len(batch.spans))
        if len(writes) == 1:
            await gate.wait()  # hold the first transaction while the others arrive
        return await ingest(batch, now)

    store.ingest = counted  # type: ignore[method-assign]
    rx = OtlpReceiver(store, ReceiverSettings())
    turns = [genai_turn_spans(f"conv-{k}", "Where is my order A48213?", "It ships tomorrow.") for k in range(5)]
    bodies = [trace_request(t).SerializeToString() for t in turns]
    async with client(rx) as c:
        first = asyncio.create_task(c.post("/v1/traces", content=bodies[0], headers=PB))
        while not writes:
            await asyncio.sleep(0.01)
        rest = [asyncio.create_task(c.post("/v1/traces", content=b, headers=PB)) for b in bodies[1:]]
        while len(rx.intake._writer._waiting) < 4:  # noqa: SLF001 - until the four wait for the store
            await asyncio.sleep(0.01)
        gate.set()
        answers = [await first] + [await r for r in rest]
    assert [a.status_code for a in answers] == [200] * 5
    n = len(turns[0])
    assert writes == [n, 4 * n]  # two transactions: the first alone, then the four that waited, together
    assert rx.counters.spans == 5 * n
    assert await store.thread_keys() == [f"otlp:conv-{k}" for k in range(5)]


async def test_bearer_scheme_is_case_insensitive(store: SqlStore, spans: Any) -> None:
    rx = OtlpReceiver(store, ReceiverSettings(auth_token=SecretStr("s3cret")))
    body = trace_request(spans).SerializeToString()
    async with client(rx) as c:
        lower = await c.post("/v1/traces", content=body, headers={**PB, "authorization": "bearer s3cret"})
        basic = await c.post("/v1/traces", content=body, headers={**PB, "authorization": "Basic s3cret"})
    assert (lower.status_code, basic.status_code) == (200, 401)
