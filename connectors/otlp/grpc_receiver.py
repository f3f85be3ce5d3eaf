"""OTLP/gRPC receiver: `TraceService/Export` and `LogsService/Export` on `[receiver] grpc_address`.

The same admission, decoding and storing as OTLP/HTTP (`tracing_eval.connectors.otlp.intake`), so the same
promises hold: an OK answer means the data is committed, spans the store cannot hold are rejected in
`partial_success`, and a refusal says whether and when to retry. The services are registered by the
names in opentelemetry-proto's descriptors with the request left as bytes, so the message is parsed
on a decode thread after admission, as over HTTP, not on the event loop before it (which the generated
`add_TraceServiceServicer_to_server` would do).

| reason | gRPC status |
|---|---|
| `unauthorized` (metadata `authorization: Bearer <token>`) | UNAUTHENTICATED |
| `bad_payload` | INVALID_ARGUMENT |
| `too_large` (also grpc's own `max_receive_message_length` = `max_body_bytes`) | RESOURCE_EXHAUSTED |
| `sinks_behind` | RESOURCE_EXHAUSTED with RetryInfo |
| `overloaded`, `store_busy`, `store_error` | UNAVAILABLE with RetryInfo |

RetryInfo (`retry_delay` = `retry_after_seconds`) goes in the trailers twice: as `grpc-status-details-bin`
(a `google.rpc.Status` carrying it, the standard place) and as `google.rpc.retryinfo-bin`, where the
OpenTelemetry Python exporter reads it. gRPC compression (`grpc-encoding: gzip`) is undone by grpc
itself, within the same size limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.decode import PROTOBUF
from tracing_eval.connectors.otlp.intake import TRANSPORTS, Intake, Refusal, export_response

#: The `source` label of what this receiver stores, in the telemetry
TELEMETRY_SOURCE = TRANSPORTS[1]
TRACE_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name
CODES = {
    "unauthorized": grpc.StatusCode.UNAUTHENTICATED,
    "bad_payload": grpc.StatusCode.INVALID_ARGUMENT,
    "too_large": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "sinks_behind": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "overloaded": grpc.StatusCode.UNAVAILABLE,
    "store_busy": grpc.StatusCode.UNAVAILABLE,
    "store_error": grpc.StatusCode.UNAVAILABLE,
}


class GrpcBindError(OSError):
    """The gRPC address cannot be listened on."""


def retry_trailers(code: grpc.StatusCode, message: str, seconds: int) -> tuple[tuple[str, bytes], ...]:
    """Trailing metadata that tells a client to retry after `seconds` (see the module docstring)."""
    info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=seconds))
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    return (
        ("grpc-status-details-bin", status.SerializeToString()),
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
    )


class OtlpGrpcReceiver:
    """A grpc.aio server for the OTLP trace and logs services, over the worker's `Intake`."""

    def __init__(self, intake: Intake, settings: ReceiverSettings) -> None:
        self.intake = intake
        self.settings = settings
        self.server: grpc.aio.Server | None = None
        self.port: int | None = None

    async def start(self, address: str) -> int:
        """Listen on `address` (HOST:PORT; port 0 picks one) and serve; returns the port."""
        limit = self.settings.max_body_bytes
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=self.settings.max_pending_requests,
        )
        self.server.add_generic_rpc_handlers(
            (
                self._service(TRACE_SERVICE, "traces", trace_service_pb2.ExportTraceServiceResponse),
                self._service(LOGS_SERVICE, "logs", logs_service_pb2.ExportLogsServiceResponse),
            )
        )
        try:
            port = self.server.add_insecure_port(address)
        except RuntimeError as exc:
            port, error = 0, str(exc)
        else:
            error = ""
        if not port:
            self.server = None
            raise GrpcBindError(f"cannot listen on {address} for OTLP/gRPC {error}".strip())
        await self.server.start()
        self.port = port
        return port

    async def stop(self, grace: float) -> None:
        """Stop taking calls; calls in progress get up to `grace` seconds, then are cancelled."""
        if self.server is not None:
            await self.server.stop(grace)

    def _service(self, name: str, signal: str, response: Any) -> grpc.GenericRpcHandler:
        handler: grpc.RpcMethodHandler[bytes, Any] = grpc.unary_unary_rpc_method_handler(
            self._handler(signal),
            request_deserializer=None,  # bytes: parsed on a decode thread, after admission
            response_serializer=response.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(name, {"Export": handler})

    def _handler(self, signal: str) -> Callable[[bytes, grpc.aio.ServicerContext[bytes, Any]], Awaitable[Any]]:
        async def export(body: bytes, context: grpc.aio.ServicerContext[bytes, Any]) -> Any:
            metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}  # no -bin key read
            held = self.intake.reservation()
            try:
                if not self.intake.authorized(metadata.get("authorization")):
                    raise Refusal("unauthorized", "missing or wrong bearer token")
                await self.intake.check_backlog()
                held.take(len(body))
                accepted = await self.intake.export(signal, body, None, PROTOBUF, held, transport=TELEMETRY_SOURCE)
            except Refusal as refusal:
                await self._abort(context, refusal, context.peer())
                raise AssertionError("unreachable: abort raises") from None
            finally:
                held.close()
            return export_response(signal, accepted)

        return export

    async def _abort(self, context: grpc.aio.ServicerContext[bytes, Any], refusal: Refusal, peer: str) -> None:
        self.intake.refuse(TELEMETRY_SOURCE, refusal, peer=peer)
        code = CODES[refusal.reason]
        trailers = retry_trailers(code, refusal.message, self.settings.retry_after_seconds) if refusal.retryable else ()
        await context.abort(code, refusal.message, trailing_metadata=trailers)
