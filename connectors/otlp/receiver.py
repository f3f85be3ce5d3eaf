"""OTLP/HTTP receiver: `/v1/traces` and `/v1/logs`, protobuf or JSON, gzip or deflate.

A 200 means the data is committed to the store. When the store cannot take it in time the
answer is 503 with Retry-After (the exporter retries), never an acknowledgement that could be lost.

Backpressure, before a body is read: more than `max_pending_requests` requests in progress get 503
(`overloaded`), and an outbox holding `max_outbox_backlog` undelivered rows gets 429
(`sinks_behind`), both with Retry-After, so memory stays bounded while the store or a sink is behind.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from connectors.otlp.decode import (
    JSON,
    Decoded,
    OtlpDecodeError,
    PayloadTooLarge,
    decode_logs,
    decode_traces,
    decompress,
    media_type,
)
from tracing_eval.config import ReceiverSettings
from tracing_eval.ingest import make_batch
from tracing_eval.store.base import Store
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)

# google.rpc.Code values used in error bodies
_INVALID_ARGUMENT, _UNAUTHENTICATED, _UNAVAILABLE, _RESOURCE_EXHAUSTED = 3, 16, 14, 8
#: Why a request is refused (or, `partial`, answered with some spans rejected)
REJECT_REASONS = (
    "unsupported_media_type",
    "unauthorized",
    "too_large",
    "bad_payload",
    "store_busy",
    "store_error",
    "overloaded",
    "sinks_behind",
    "partial",
)
#: The `source` label of what the receiver stores, in the telemetry
TELEMETRY_SOURCE = "otlp-http"
#: How often the outbox backlog is read from the store; requests in between use the last reading
BACKLOG_READ_INTERVAL_SECONDS = 1.0


@dataclass
class ReceiverCounters:
    """What the receiver saw; also counted in the worker's telemetry (for `/metrics`) when given."""

    spans: int = 0
    events: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    telemetry: Telemetry | None = None

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        if self.telemetry is not None:
            self.telemetry.rejected(reason)

    def received(self, spans: int, events: int, threads: int) -> None:
        self.spans += spans
        self.events += events
        if self.telemetry is not None:
            self.telemetry.received(TELEMETRY_SOURCE, spans, events, threads)


class OutboxBacklog:
    """Outbox rows waiting for delivery (not delivered, not parked), read from the store at
    most once per `interval` seconds and shared by every request in between.

    Only `sinks` count (None: every sink in the outbox; empty: none, and the store is never read), so
    rows left for a sink that is no longer configured cannot block ingest. A read that fails or takes
    longer than `timeout` is logged and reads as unknown (None) until the next one: ingest goes on,
    and a broken store is answered by the write path."""

    def __init__(
        self,
        store: Store,
        sinks: Iterable[str] | None,
        *,
        timeout: float,
        clock: Callable[[], float] = time.time,
        interval: float = BACKLOG_READ_INTERVAL_SECONDS,
    ) -> None:
        self.store = store
        self.sinks = None if sinks is None else frozenset(sinks)
        self.timeout = timeout
        self.clock = clock
        self.interval = interval
        self._rows: int | None = None
        self._read_at: float | None = None
        self._lock = asyncio.Lock()  # one read at a time; requests arriving meanwhile wait for it

    async def rows(self) -> int | None:
        """The backlog as last read (refreshed when the reading is older than `interval`), or None."""
        if self.sinks is not None and not self.sinks:
            return 0
        async with self._lock:
            now = self.clock()
            if self._read_at is None or not 0 <= now - self._read_at < self.interval:  # also if the clock went back
                self._rows = await self._read(now)
                self._read_at = now
            return self._rows

    async def _read(self, now: float) -> int | None:
        try:
            stats = await asyncio.wait_for(self.store.outbox_stats(now), self.timeout)
        except Exception as exc:  # a timeout too
            log.warning("cannot read the outbox backlog; accepting requests", error=f"{type(exc).__name__}: {exc}")
            return None
        return sum(n for sink, (n, _) in stats.items() if self.sinks is None or sink in self.sinks)


def _body(mt: str, message: object) -> bytes:
    if mt == JSON:
        return json_format.MessageToJson(message, indent=None).encode()  # type: ignore[arg-type]
    return message.SerializeToString()  # type: ignore[attr-defined]


class OtlpReceiver:
    """Starlette routes for the receiver, bound to one store."""

    def __init__(
        self,
        store: Store,
        settings: ReceiverSettings,
        *,
        source: str = "otlp",
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
        sinks: Iterable[str] | None = None,
    ):
        """`sinks`: the outbox sinks whose backlog counts against `max_outbox_backlog` (None: all)."""
        self.store = store
        self.settings = settings
        self.source = source
        self.clock = clock
        self.counters = ReceiverCounters(telemetry=telemetry)
        if telemetry is not None:
            telemetry.prime(reject_reasons=REJECT_REASONS, sources=[TELEMETRY_SOURCE])
        self._writes = asyncio.Semaphore(settings.max_concurrent_writes)
        self._pending = 0  # requests let in: reading, decoding, waiting for or writing to the store
        self.backlog = OutboxBacklog(store, sinks, timeout=settings.write_timeout_seconds, clock=clock)

    @property
    def pending(self) -> int:
        """Requests in progress: reading, decoding, waiting for or writing to the store."""
        return self._pending

    def routes(self) -> list[Route]:
        return [
            Route("/v1/traces", self.traces, methods=["POST"]),
            Route("/v1/logs", self.logs, methods=["POST"]),
        ]

    async def traces(self, request: Request) -> Response:
        return await self._handle(request, "traces")

    async def logs(self, request: Request) -> Response:
        return await self._handle(request, "logs")

    def _error(
        self, mt: str, status: int, code: int, message: str, reason: str, headers: dict[str, str] | None = None
    ) -> Response:
        self.counters.reject(reason)
        log.warning("OTLP request refused", status=status, reason=reason, detail=message)
        body = _body(mt, status_pb2.Status(code=code, message=message))
        return Response(body, status_code=status, media_type=mt, headers=headers)

    async def _handle(self, request: Request, signal: str) -> Response:
        try:
            mt = media_type(request.headers.get("content-type"))
        except OtlpDecodeError as exc:
            self.counters.reject("unsupported_media_type")
            return Response(str(exc), status_code=415, media_type="text/plain")
        if self.settings.auth_token is not None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            expected = self.settings.auth_token.get_secret_value().encode()
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
                return self._error(
                    mt,
                    401,
                    _UNAUTHENTICATED,
                    "missing or wrong bearer token",
                    "unauthorized",
                    {"WWW-Authenticate": "Bearer"},
                )
        retry = {"Retry-After": str(self.settings.retry_after_seconds)}
        if self._pending >= self.settings.max_pending_requests:
            return self._error(mt, 503, _UNAVAILABLE, "too many requests in progress; retry later", "overloaded", retry)
        self._pending += 1
        try:
            return await self._admit(request, mt, signal, retry)
        finally:
            self._pending -= 1

    async def _admit(self, request: Request, mt: str, signal: str, retry: dict[str, str]) -> Response:
        """Refuse while the sinks are behind, else read, decode and store the request."""
        if most := self.settings.max_outbox_backlog:
            backlog = await self.backlog.rows()
            if backlog is not None and backlog >= most:
                message = (
                    f"the sinks are behind ({backlog} deliveries wait in the outbox; the limit is {most}); retry later"
                )
                return self._error(mt, 429, _RESOURCE_EXHAUSTED, message, "sinks_behind", retry)
        limit = self.settings.max_body_bytes
        try:
            raw = await self._read(request, limit)
            body = decompress(raw, request.headers.get("content-encoding"), limit)
            decoded = decode_traces(body, mt) if signal == "traces" else decode_logs(body, mt)
        except PayloadTooLarge as exc:
            return self._error(mt, 413, _RESOURCE_EXHAUSTED, str(exc), "too_large")
        except OtlpDecodeError as exc:
            return self._error(mt, 400, _INVALID_ARGUMENT, str(exc), "bad_payload")
        except ClientDisconnect:
            return Response(status_code=400)
        return await self._store(mt, signal, decoded, retry)

    @staticmethod
    async def _read(request: Request, limit: int) -> bytes:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"body is {declared} bytes; the limit is {limit}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _store(self, mt: str, signal: str, decoded: Decoded, retry: dict[str, str]) -> Response:
        batch = make_batch(decoded.spans, [(e.trace_id, e.span_id, e.event) for e in decoded.logs], source=self.source)
        threads = 0
        if batch.spans or batch.events:
            try:
                await asyncio.wait_for(self._writes.acquire(), self.settings.write_timeout_seconds)
            except TimeoutError:
                return self._error(mt, 503, _UNAVAILABLE, "the store is behind; retry later", "store_busy", retry)
            try:
                stats = await self.store.ingest(batch, self.clock())
            except Exception as exc:  # the exporter keeps the data and retries
                log.error("store write failed", error=f"{type(exc).__name__}: {exc}")
                return self._error(
                    mt, 503, _UNAVAILABLE, "the store could not write the data; retry later", "store_error", retry
                )
            finally:
                self._writes.release()
            threads = stats.threads_changed
        self.counters.received(len(batch.spans), len(batch.events), threads)
        if signal == "traces":
            resp: ExportTraceServiceResponse | ExportLogsServiceResponse = ExportTraceServiceResponse()
            if decoded.rejected:
                resp.partial_success.rejected_spans = decoded.rejected
                resp.partial_success.error_message = "; ".join(decoded.errors[:5])
        else:
            resp = ExportLogsServiceResponse()
            if decoded.rejected:
                resp.partial_success.rejected_log_records = decoded.rejected
                resp.partial_success.error_message = "; ".join(decoded.errors[:5])
        if decoded.rejected:
            self.counters.reject("partial")
        return Response(_body(mt, resp), status_code=200, media_type=mt)
