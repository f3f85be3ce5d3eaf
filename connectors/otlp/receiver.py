"""OTLP/HTTP receiver: `/v1/traces` and `/v1/logs`, protobuf or JSON, gzip or deflate.

A 200 means the data is committed to the store. When the store cannot take it in time the
answer is 503 with Retry-After (the exporter retries), never an acknowledgement that could be lost.
Admission, decoding and storing are shared with the gRPC receiver (`tracing_eval.connectors.otlp.intake`); this
module reads the HTTP request and turns a refusal into its status:

| reason | status |
|---|---|
| `unauthorized` | 401, `WWW-Authenticate: Bearer` (checked first, before anything else of the request) |
| `unsupported_media_type` | 415 |
| `body_timeout` | 408: the body did not arrive within `body_timeout_seconds` |
| `too_large` | 413 |
| `bad_payload` | 400 |
| `sinks_behind` | 429 + Retry-After (before the body is read) |
| `overloaded`, `store_busy`, `store_error` | 503 + Retry-After |

Errors carry a `google.rpc.Status` in the request's encoding (415 and 401 without a known encoding:
protobuf).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tracing_eval.config import ConfigError, ReceiverSettings
from tracing_eval.connectors.otlp.decode import JSON, PROTOBUF, OtlpDecodeError, media_type
from tracing_eval.connectors.otlp.intake import (
    REJECT_REASONS,
    TRANSPORTS,
    Intake,
    OutboxBacklog,
    ReceiverCounters,
    Refusal,
    Reservation,
    export_response,
)
from tracing_eval.sources import PullSource, SourceStore
from tracing_eval.store.base import Store
from tracing_eval.telemetry import Telemetry

if TYPE_CHECKING:
    from tracing_eval.connectors.otlp.grpc_receiver import OtlpGrpcReceiver

__all__ = ["REJECT_REASONS", "TELEMETRY_SOURCE", "OtlpReceiver", "OtlpReceiverSource", "export_response"]

log = structlog.get_logger(__name__)

#: The `source` label of what this receiver stores, in the telemetry
TELEMETRY_SOURCE = TRANSPORTS[0]
#: HTTP status and google.rpc code per refusal reason
STATUS = {
    "unauthorized": (401, 16),
    "unsupported_media_type": (415, 3),
    "body_timeout": (408, 4),
    "too_large": (413, 8),
    "bad_payload": (400, 3),
    "sinks_behind": (429, 8),
    "overloaded": (503, 14),
    "store_busy": (503, 14),
    "store_error": (503, 14),
}


def _body(mt: str, message: Message) -> bytes:
    if mt == JSON:
        return json_format.MessageToJson(message, indent=None).encode()
    return message.SerializeToString()


class OtlpReceiver:
    """Starlette routes for the receiver, bound to one store (or to the `intake` of another receiver)."""

    def __init__(
        self,
        store: Store,
        settings: ReceiverSettings,
        *,
        source: str = "otlp",
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
        sinks: Iterable[str] | None = None,
        intake: Intake | None = None,
    ):
        """`sinks`: the outbox sinks whose backlog counts against `max_outbox_backlog` (None: all)."""
        self.settings = settings
        self.intake = intake or Intake(
            store,
            settings,
            source=source,
            clock=clock,
            telemetry=telemetry,
            sinks=sinks,
            transports=TRANSPORTS,
        )

    @property
    def counters(self) -> ReceiverCounters:
        return self.intake.counters

    @property
    def backlog(self) -> OutboxBacklog:
        return self.intake.backlog

    @property
    def pending(self) -> int:
        """Requests with a complete body in progress: decoding, waiting for or writing to the store."""
        return self.intake.pending

    def routes(self) -> list[Route]:
        return [
            Route("/v1/traces", self.traces, methods=["POST"]),
            Route("/v1/logs", self.logs, methods=["POST"]),
        ]

    async def traces(self, request: Request) -> Response:
        return await self._handle(request, "traces")

    async def logs(self, request: Request) -> Response:
        return await self._handle(request, "logs")

    def _refused(self, mt: str, refusal: Refusal) -> Response:
        self.intake.refuse(TELEMETRY_SOURCE, refusal)
        status, code = STATUS[refusal.reason]
        headers = {"Retry-After": str(self.settings.retry_after_seconds)} if refusal.retryable else {}
        if refusal.reason == "unauthorized":
            headers["WWW-Authenticate"] = "Bearer"
        if refusal.reason == "unsupported_media_type":
            return Response(refusal.message, status_code=status, media_type="text/plain")
        return Response(
            _body(mt, status_pb2.Status(code=code, message=refusal.message)),
            status_code=status,
            media_type=mt,
            headers=headers,
        )

    async def _handle(self, request: Request, signal: str) -> Response:
        bad_type: str | None
        try:
            mt = media_type(request.headers.get("content-type"))
        except OtlpDecodeError as exc:
            mt, bad_type = PROTOBUF, str(exc)
        else:
            bad_type = None
        if not self.intake.authorized(request.headers.get("authorization")):
            return self._refused(mt, Refusal("unauthorized", "missing or wrong bearer token"))
        if bad_type is not None:
            return self._refused(mt, Refusal("unsupported_media_type", bad_type))
        held = self.intake.reservation()
        try:
            await self.intake.check_backlog()
            body = await self._read(request, held)
            accepted = await self.intake.export(
                signal, body, request.headers.get("content-encoding"), mt, held, transport=TELEMETRY_SOURCE
            )
        except Refusal as refusal:
            return self._refused(mt, refusal)
        except ClientDisconnect:
            return Response(status_code=400)
        finally:
            held.close()
        return Response(_body(mt, export_response(signal, accepted)), status_code=200, media_type=mt)

    async def _read(self, request: Request, held: Reservation) -> bytes:
        """The whole body, within `body_timeout_seconds`, each chunk taken from the memory budget."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise Refusal("too_large", f"body is {declared} bytes; the limit is {limit}")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.settings.body_timeout_seconds):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise Refusal("too_large", f"body exceeds the limit of {limit} bytes")
                    held.take(len(chunk))
                    chunks.append(chunk)
        except TimeoutError:
            raise Refusal(
                "body_timeout",
                f"the body did not arrive within {self.settings.body_timeout_seconds:g} s "
                f"({size} bytes received); send it whole and retry",
            ) from None
        return b"".join(chunks)


class OtlpReceiverSource(PullSource):
    """The receiver as a `Source`: `/v1/traces` and `/v1/logs` on the worker's HTTP server, and
    OTLP/gRPC beside them when `[receiver] grpc_address` is set. It stores spans as requests arrive,
    so a pull finds nothing to do."""

    name = TELEMETRY_SOURCE

    def __init__(
        self,
        store: Store,
        settings: ReceiverSettings,
        *,
        telemetry: Telemetry | None = None,
        sinks: Iterable[str] | None = None,
    ) -> None:
        self.settings = settings
        self.receiver = OtlpReceiver(store, settings, telemetry=telemetry, sinks=sinks)
        self.grpc: OtlpGrpcReceiver | None = None
        self._closed = False

    def routes(self) -> list[BaseRoute]:
        return list(self.receiver.routes())

    async def pull(self, store: SourceStore, now: float) -> int:
        return 0

    async def start(self) -> None:
        """Serve OTLP/gRPC when an address is set. A default address that is taken is a warning (gRPC
        stays off); an address set explicitly must be free."""
        from tracing_eval.connectors.otlp.grpc_receiver import GrpcBindError, OtlpGrpcReceiver

        address = self.settings.grpc_address
        if not address:
            return
        grpc = OtlpGrpcReceiver(self.receiver.intake, self.settings)
        try:
            await grpc.start(address)
        except GrpcBindError as exc:
            if "grpc_address" in self.settings.model_fields_set:
                raise ConfigError(f"{exc}; set [receiver] grpc_address (empty: no gRPC)") from None
            log.warning("OTLP/gRPC is off: its default address is taken", error=str(exc))
            return
        self.grpc = grpc
        log.info("OTLP/gRPC receiver listening", grpc=address)

    async def stop(self, drain_seconds: float) -> None:
        """Stop taking gRPC calls (those in progress get `drain_seconds`); the HTTP routes stop with the server."""
        if self.grpc is not None:
            await self.grpc.stop(drain_seconds)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self.receiver.intake.close()
