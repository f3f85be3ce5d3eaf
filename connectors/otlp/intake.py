"""What the OTLP receivers share, whatever the transport (HTTP or gRPC): auth, admission, decoding
off the event loop, and storing.

A request is admitted in steps, each refusing with a reason the transport turns into its own status:

1. the bearer token (`unauthorized`);
2. the outbox backlog (`sinks_behind`), read at most once a second;
3. the body, reserved byte by byte from the memory budget (`[receiver] max_inflight_bytes`) as it
   arrives and as it decompresses (`overloaded` when the budget is spent, `too_large` past
   `max_body_bytes`);
4. once the body is complete, the bound on requests in progress (`max_pending_requests`, `overloaded`).

Decompressing, parsing and turning spans into canonical form run on a small thread pool, never on the
event loop, and spans are stored `CHUNK_SPANS` at a time: the parsed request and one chunk of
canonical spans are in memory at once, not a canonical copy of the whole request. Chunks are stored
through a `GroupWriter`: on SQLite, chunks of requests that wait for the store go into one
transaction together. A span the store refuses for its data is rejected in `partial_success`, the rest is stored;
only a store that is down or busy makes the answer "retry later".
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.decode import (
    Decoded,
    OtlpDecodeError,
    PayloadTooLarge,
    decompress,
    log_chunks,
    parse_logs,
    parse_traces,
    span_chunks,
)
from tracing_eval.ingest import GroupWriter, make_batch
from tracing_eval.store.base import IngestBatch, Store
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)
T = TypeVar("T")

#: The `source` labels of what the receivers store, in the telemetry
TRANSPORTS = ("otlp-http", "otlp-grpc")
#: Why a request is refused (or, `partial`, answered with some spans rejected)
REJECT_REASONS = (
    "unsupported_media_type",
    "unauthorized",
    "too_large",
    "bad_payload",
    "body_timeout",
    "store_busy",
    "store_error",
    "overloaded",
    "sinks_behind",
    "partial",
)
#: Reasons whose answer tells the client to retry after `retry_after_seconds`
RETRYABLE = frozenset({"store_busy", "store_error", "overloaded", "sinks_behind"})
#: How often the outbox backlog is read from the store; requests in between use the last reading
BACKLOG_READ_INTERVAL_SECONDS = 1.0
#: Spans (or log records) turned into canonical form and stored per transaction
CHUNK_SPANS = 2000
#: Threads that decompress, parse and convert requests; more requests wait for a free one
DECODE_THREADS = 2
#: A refusal of one reason is logged at most once per this many seconds (with the count in between)
REFUSAL_LOG_INTERVAL_SECONDS = 10.0


class Refusal(Exception):
    """The request is refused: `reason` is one of REJECT_REASONS, `message` says why to the client."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.reason in RETRYABLE


class MemoryBudget:
    """Bytes of request data in memory (bodies as read, decompressed, and parsed), across requests.
    Thread-safe: the decode threads take from it while they decompress."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.limit:
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used -= n


class Reservation:
    """One request's share of the budget; `close()` gives it all back."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget
        self.held = 0

    def take(self, n: int) -> None:
        if not self.budget.take(n):
            raise Refusal(
                "overloaded",
                f"the receiver holds {self.budget.used} bytes of requests (max_inflight_bytes is "
                f"{self.budget.limit}); retry later",
            )
        self.held += n

    def give(self, n: int) -> None:
        n = min(n, self.held)
        self.held -= n
        self.budget.give(n)

    def close(self) -> None:
        self.give(self.held)


@dataclass
class Accepted:
    """What was stored of an accepted request, and what was rejected (for `partial_success`)."""

    spans: int = 0
    events: int = 0
    threads: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)


def export_response(signal: str, accepted: Accepted) -> ExportTraceServiceResponse | ExportLogsServiceResponse:
    """The OTLP answer to an accepted request, with `partial_success` when anything was rejected."""
    resp: ExportTraceServiceResponse | ExportLogsServiceResponse
    if signal == "traces":
        resp = traces = ExportTraceServiceResponse()
        if accepted.rejected:
            traces.partial_success.rejected_spans = accepted.rejected
    else:
        resp = logs = ExportLogsServiceResponse()
        if accepted.rejected:
            logs.partial_success.rejected_log_records = accepted.rejected
    if accepted.rejected:
        resp.partial_success.error_message = "; ".join(accepted.errors[:5])
    return resp


@dataclass
class ReceiverCounters:
    """What the receivers saw; also counted in the worker's telemetry (for `/metrics`) when given."""

    spans: int = 0
    events: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    telemetry: Telemetry | None = None

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        if self.telemetry is not None:
            self.telemetry.rejected(reason)

    def received(self, source: str, spans: int, events: int, threads: int) -> None:
        self.spans += spans
        self.events += events
        if self.telemetry is not None:
            self.telemetry.received(source, spans, events, threads)


class RefusalLog:
    """Logs refusals without flooding: per reason, one line per interval, saying how many were
    refused since the last line."""

    def __init__(self, interval: float = REFUSAL_LOG_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def refused(self, transport: str, reason: str, detail: str, **fields: Any) -> None:
        self._since[reason] = self._since.get(reason, 0) + 1
        now = self.clock()
        last = self._last.get(reason)
        if last is not None and 0 <= now - last < self.interval:
            return
        count, self._since[reason], self._last[reason] = self._since[reason], 0, now
        log.warning("OTLP request refused", transport=transport, reason=reason, detail=detail, refused=count, **fields)


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


class Intake:
    """The admission, decoding and storing behind every OTLP receiver of one worker."""

    def __init__(
        self,
        store: Store,
        settings: ReceiverSettings,
        *,
        source: str = "otlp",
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
        sinks: Iterable[str] | None = None,
        transports: Iterable[str] = (),
    ) -> None:
        self.store = store
        self.settings = settings
        self.source = source
        self.clock = clock
        self.counters = ReceiverCounters(telemetry=telemetry)
        if telemetry is not None:
            telemetry.prime(reject_reasons=REJECT_REASONS, sources=list(transports))
        self.budget = MemoryBudget(settings.max_inflight_bytes)
        self.backlog = OutboxBacklog(store, sinks, timeout=settings.write_timeout_seconds, clock=clock)
        self.refusals = RefusalLog()
        # SQLite writes one transaction at a time (more writers would only wait on its lock), so the
        # requests that wait meanwhile go into the next one together; on PostgreSQL transactions side
        # by side, one request each, store more per second (bench/group_commit.py)
        if getattr(store, "dialect", None) == "sqlite":
            self._writer = GroupWriter(store, 1, clock, together=True)
        else:
            self._writer = GroupWriter(store, settings.max_concurrent_writes, clock, together=False)
        self._pending = 0  # requests with a complete body: decoding, waiting for or writing to the store
        self._pool: ThreadPoolExecutor | None = None

    @property
    def pending(self) -> int:
        """Requests whose body is complete and which are decoding, waiting for or writing to the store."""
        return self._pending

    def authorized(self, authorization: str | None) -> bool:
        """Whether an `Authorization` value carries the configured bearer token (always, without one).
        Only ASCII blanks around the token are ignored; the comparison takes constant time."""
        if self.settings.auth_token is None:
            return True
        scheme, _, token = (authorization or "").partition(" ")
        expected = self.settings.auth_token.get_secret_value().encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(" \t").encode(), expected)

    def refuse(self, transport: str, refusal: Refusal, **fields: Any) -> None:
        """Count and (rate-limited) log a refusal."""
        self.counters.reject(refusal.reason)
        self.refusals.refused(transport, refusal.reason, refusal.message, **fields)

    async def check_backlog(self) -> None:
        """Refuse while the sinks are behind (before any of the body is read)."""
        most = self.settings.max_outbox_backlog
        if not most:
            return
        backlog = await self.backlog.rows()
        if backlog is not None and backlog >= most:
            raise Refusal(
                "sinks_behind",
                f"the sinks are behind ({backlog} deliveries wait in the outbox; the limit is {most}); retry later",
            )

    def reservation(self) -> Reservation:
        return Reservation(self.budget)

    async def export(
        self, signal: str, body: bytes, encoding: str | None, mt: str, held: Reservation, *, transport: str
    ) -> Accepted:
        """Store a complete request body (held in `held`): raises `Refusal`, else what was stored. Pass
        the body without keeping a reference: a compressed body is dropped (and given back to the
        budget) once it is inflated."""
        if self._pending >= self.settings.max_pending_requests:
            raise Refusal("overloaded", "too many requests in progress; retry later")
        self._pending += 1
        box = [body]  # the only reference from here on, so the decode thread can let go of it
        del body
        try:
            return await self._export(signal, box, encoding, mt, held, transport)
        finally:
            self._pending -= 1

    async def _export(
        self, signal: str, box: list[bytes], encoding: str | None, mt: str, held: Reservation, transport: str
    ) -> Accepted:
        limit = self.settings.max_body_bytes
        parse: Callable[[bytes, str], Any] = parse_traces if signal == "traces" else parse_logs
        chunks: Callable[[Any, int], Iterator[Decoded]] = span_chunks if signal == "traces" else log_chunks

        def decode() -> Iterator[Decoded]:
            body = box.pop()
            plain = decompress(body, encoding, limit, reserve=held.take)
            if plain is not body:
                held.give(len(body))  # the compressed body is dropped once it is inflated
            del body
            return chunks(parse(plain, mt), CHUNK_SPANS)

        try:
            pieces = await self._off_loop(decode)
        except PayloadTooLarge as exc:
            raise Refusal("too_large", str(exc)) from None
        except OtlpDecodeError as exc:
            raise Refusal("bad_payload", str(exc)) from None
        out = Accepted()
        while (batch := await self._off_loop(self._next_batch, pieces, out)) is not None:
            if batch.spans or batch.events:
                await self._write(batch, out)
        self.counters.received(transport, out.spans, out.events, out.threads)
        if out.rejected:
            self.counters.reject("partial")
        return out

    def _next_batch(self, pieces: Iterator[Decoded], out: Accepted) -> IngestBatch | None:
        """The next chunk as an ingest batch (on a decode thread), its rejections added to `out`."""
        piece = next(pieces, None)
        if piece is None:
            return None
        out.rejected += piece.rejected
        out.errors += piece.errors[: max(0, 5 - len(out.errors))]
        return make_batch(piece.spans, [(e.trace_id, e.span_id, e.event) for e in piece.logs], source=self.source)

    async def _write(self, batch: IngestBatch, out: Accepted) -> None:
        try:
            stored = await self._writer.write(batch, self.settings.write_timeout_seconds)
        except TimeoutError:
            raise Refusal("store_busy", "the store is behind; retry later") from None
        except Exception as exc:  # transient: the exporter keeps the data and retries
            log.error("store write failed", error=f"{type(exc).__name__}: {exc}"[:500])
            raise Refusal("store_error", "the store could not write the data; retry later") from None
        out.spans += stored.stats.spans
        out.events += stored.stats.events
        out.threads += stored.stats.threads_changed
        if stored.errors:
            out.rejected += stored.refused_spans + stored.refused_events
            out.errors += stored.errors[: max(0, 5 - len(out.errors))]
            log.warning("the store refused spans for their data", refused=len(stored.errors), first=stored.errors[0])

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="otlp-decode")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        """Stop the decode threads (work already running finishes; nothing new starts)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
