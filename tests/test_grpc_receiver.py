"""The OTLP/gRPC receiver (issue 13, item 4) with the real `opentelemetry-exporter-otlp-proto-grpc`
exporters, on SQLite and PostgreSQL: delivery, bearer auth in metadata, backpressure with retry info
(the exporter waits and retries), `partial_success`, and the malformed-request corpus as gRPC calls.

Deadlines are liveness guards only, never speed checks.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import NonRecordingSpan, set_span_in_context

from tests.conftest import BACKENDS
from tests.support.otlp_payloads import genai_turn_spans, trace_request
from tests.test_backpressure import AcceptingSink, fill_outbox, stored_spans
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.grpc_receiver import LOGS_SERVICE, TRACE_SERVICE, OtlpGrpcReceiver
from tracing_eval.connectors.otlp.intake import Intake
from tracing_eval.sinks import deliver_outbox
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
CORPUS = Path(__file__).parent / "corpus" / "otlp"
LIVENESS_SECONDS = 60.0
TOKEN = "grpc-test-token"


@pytest.fixture
async def serve(store: SqlStore) -> AsyncIterator[Any]:
    """`serve(settings, **intake_kw)` starts a receiver on a free port; returns (receiver, address)."""
    started: list[OtlpGrpcReceiver] = []

    async def start(settings: ReceiverSettings, **kw: Any) -> tuple[OtlpGrpcReceiver, str]:
        rx = OtlpGrpcReceiver(Intake(store, settings, **kw), settings)
        port = await rx.start("127.0.0.1:0")
        started.append(rx)
        return rx, f"127.0.0.1:{port}"

    yield start
    for rx in started:
        await rx.stop(0)
        rx.intake.close()


def call(address: str, service: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> Any:
    """One raw unary call with `body` as the request bytes; returns (response bytes, None) or (None, error)."""
    with grpc.insecure_channel(address) as channel:
        method = channel.unary_unary(f"/{service}/Export")
        try:
            return method(body, metadata=metadata, timeout=LIVENESS_SECONDS), None
        except grpc.RpcError as error:
            return None, error


async def test_the_sdk_exporters_deliver_traces_and_logs(store: SqlStore, serve: Any) -> None:
    telemetry = Telemetry()
    rx, address = await serve(ReceiverSettings(), telemetry=telemetry, transports=["otlp-grpc"])
    spans = genai_turn_spans("grpc-conv", "Where is my order?", "It ships tomorrow.")
    exporter = OTLPSpanExporter(endpoint=address, insecure=True)
    try:
        assert await asyncio.to_thread(exporter.export, spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    [trace] = await store.load_traces("otlp:grpc-conv")
    assert sorted(s.span_id for s in trace) == sorted(f"{s.context.span_id:016x}" for s in spans)

    chat = next(s for s in spans if s.name.startswith("chat"))
    provider = LoggerProvider()
    logs = OTLPLogExporter(endpoint=address, insecure=True)
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    ctx = set_span_in_context(NonRecordingSpan(chat.context))
    await asyncio.to_thread(
        provider.get_logger("test").emit,
        context=ctx,
        event_name="gen_ai.client.inference.operation.details",
        attributes={"gen_ai.output.messages": '[{"role": "assistant", "parts": []}]'},
    )
    await asyncio.to_thread(provider.shutdown)
    [trace] = await store.load_traces("otlp:grpc-conv")
    loaded = next(s for s in trace if s.name.startswith("chat"))
    assert [e.name for e in loaded.events] == ["gen_ai.client.inference.operation.details"]
    assert rx.intake.counters.spans == len(spans) and rx.intake.counters.events == 1
    assert telemetry.registry.get_sample_value("tracing_eval_spans_received_total", {"source": "otlp-grpc"}) == float(
        len(spans)
    )


async def test_bearer_auth_is_read_from_the_metadata(store: SqlStore, serve: Any) -> None:
    from pydantic import SecretStr

    _, address = await serve(ReceiverSettings(auth_token=SecretStr(TOKEN)))
    body = trace_request(genai_turn_spans("authed", "Hi?", "Hello.")).SerializeToString()
    for metadata in ((), (("authorization", "Bearer nope"),), (("authorization", f"Basic {TOKEN}"),)):
        answer, error = await asyncio.to_thread(call, address, TRACE_SERVICE, body, metadata)
        assert answer is None and error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert error.details() == "missing or wrong bearer token"
    assert await store.thread_keys() == []
    exporter = OTLPSpanExporter(endpoint=address, insecure=True, headers={"authorization": f"Bearer {TOKEN}"})
    try:
        spans = genai_turn_spans("authed", "Hi?", "Hello.")
        assert await asyncio.to_thread(exporter.export, spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert await store.thread_keys() == ["otlp:authed"]


def retry_delay(error: grpc.RpcError) -> tuple[int, int]:
    """The retry delay in `grpc-status-details-bin` and in `google.rpc.retryinfo-bin` (seconds each)."""
    trailers = dict(error.trailing_metadata())
    status = status_pb2.Status()
    status.ParseFromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(info)
    plain = error_details_pb2.RetryInfo()
    plain.ParseFromString(trailers["google.rpc.retryinfo-bin"])
    return info.retry_delay.seconds, plain.retry_delay.seconds


async def test_sinks_behind_is_resource_exhausted_with_retry_info_and_the_exporter_retries_through_it(
    store: SqlStore, serve: Any
) -> None:
    await fill_outbox(store, "webhook", 3)
    rx, address = await serve(ReceiverSettings(max_outbox_backlog=3, retry_after_seconds=1), sinks=["webhook"])
    body = trace_request(genai_turn_spans("behind", "Hi?", "Hello.")).SerializeToString()
    answer, error = await asyncio.to_thread(call, address, TRACE_SERVICE, body)
    assert answer is None and error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the sinks are behind" in error.details() and retry_delay(error) == (1, 1)

    exporter = OTLPSpanExporter(endpoint=address, insecure=True, timeout=int(LIVENESS_SECONDS))
    spans = genai_turn_spans("behind", "Hi?", "Hello.")
    try:
        exporting = asyncio.create_task(asyncio.to_thread(exporter.export, spans))
        deadline = time.monotonic() + LIVENESS_SECONDS
        while rx.intake.counters.rejected.get("sinks_behind", 0) < 2:  # the exporter was refused too
            assert time.monotonic() < deadline, "the exporter never called"
            await asyncio.sleep(0.01)
        assert await stored_spans(store) == 0
        await deliver_outbox(store, [AcceptingSink("webhook")], time.time(), max_attempts=10)  # type: ignore[list-item]
        assert await asyncio.wait_for(exporting, LIVENESS_SECONDS) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert await stored_spans(store) == len(spans)


async def test_a_spent_memory_budget_is_unavailable_with_retry_info(store: SqlStore, serve: Any) -> None:
    rx, address = await serve(ReceiverSettings(max_body_bytes=1000, max_inflight_bytes=2000, retry_after_seconds=3))
    assert rx.intake.budget.take(1500)  # another request holds most of the budget
    body = trace_request(genai_turn_spans("squeezed", "Hi?", "Hello.")).SerializeToString()
    _, error = await asyncio.to_thread(call, address, TRACE_SERVICE, body[:900])
    assert error.code() is grpc.StatusCode.UNAVAILABLE and "max_inflight_bytes is 2000" in error.details()
    assert retry_delay(error) == (3, 3)
    _, error = await asyncio.to_thread(call, address, TRACE_SERVICE, body + b"\0" * 1000)
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # grpc's own limit: max_body_bytes
    rx.intake.budget.give(1500)
    assert rx.intake.budget.used == 0


async def test_bad_spans_are_rejected_in_partial_success_and_garbage_is_invalid_argument(
    store: SqlStore, serve: Any
) -> None:
    _, address = await serve(ReceiverSettings())
    req = trace_request(genai_turn_spans("partial", "Hi?", "Hello."))
    req.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = 2**64 - 1
    answer, error = await asyncio.to_thread(call, address, TRACE_SERVICE, req.SerializeToString())
    assert error is None
    resp = ExportTraceServiceResponse.FromString(answer)
    assert resp.partial_success.rejected_spans == 1
    assert "startTimeUnixNano 18446744073709551615 is out of range" in resp.partial_success.error_message
    assert len((await store.load_traces("otlp:partial"))[0]) == 1

    _, error = await asyncio.to_thread(call, address, TRACE_SERVICE, b"\x0a\xff\xff\xff")
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a valid ExportTraceServiceRequest protobuf" in error.details()


async def test_the_corpus_protobuf_requests_get_the_same_answers_over_grpc(store: SqlStore, serve: Any) -> None:
    """Every protobuf request of the malformed-request corpus (no HTTP compression: gRPC has its own),
    as a gRPC call: 400 is INVALID_ARGUMENT, 413 RESOURCE_EXHAUSTED, 200 OK with the same rejections."""
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    rx, address = await serve(ReceiverSettings(max_body_bytes=manifest["max_body_bytes"]))
    codes = {400: grpc.StatusCode.INVALID_ARGUMENT, 413: grpc.StatusCode.RESOURCE_EXHAUSTED}
    items = [
        i
        for i in manifest["items"]
        if i["headers"].get("content-type", "").split(";")[0].strip().lower()
        in ("application/x-protobuf", "application/protobuf")
        and i["headers"].get("content-encoding", "identity").lower() == "identity"
    ]
    assert len(items) > 60
    found: list[str] = []
    for item in items:
        service = TRACE_SERVICE if item["path"] == "/v1/traces" else LOGS_SERVICE
        body = (CORPUS / item["file"]).read_bytes()
        answer, error = await asyncio.to_thread(call, address, service, body)
        if item["status"] == 200:
            if error is not None:
                found.append(f"{item['file']}: {error.code()} {error.details()}")
                continue
            resp: Any = (ExportTraceServiceResponse if service == TRACE_SERVICE else ExportLogsServiceResponse)()
            resp.ParseFromString(answer)
            ps = resp.partial_success
            rejected = ps.rejected_spans if service == TRACE_SERVICE else ps.rejected_log_records
            if rejected != item["rejected"] or item["message"] not in ps.error_message:
                found.append(f"{item['file']}: rejected {rejected} {ps.error_message!r}, expected {item}")
        elif error is None or error.code() is not codes[item["status"]]:
            found.append(f"{item['file']}: {error and error.code()}, expected {codes[item['status']]}")
        elif item["status"] == 400 and item["message"] not in error.details():
            found.append(f"{item['file']}: {error.details()!r} lacks {item['message']!r}")
    assert not found, "\n".join(found)
    ok = [i for i in items if i["status"] == 200]
    assert await stored_spans(store) > 0 and rx.intake.counters.spans == sum(i["spans"] for i in ok)
