"""The OTLP sink: each metric result as a `gen_ai.evaluation.result` event over OTLP/HTTP protobuf.

An event is an OTel log record with `event_name`, encoded here as the SDK's Logs API and
`OTLPLogExporter` encode one (the same resource, scope, ids, flags and attributes; a test compares the
two), without the SDK's per-record objects, and posted over HTTP. A per-turn result is parented to the turn's root span (the record carries its
trace and span ids); a thread result to the last turn's root span, with `gen_ai.conversation.id`.

Delivery is confirmed before `deliver` returns: the record is exported on the spot (no batch queue
that could drop it) and a failed export raises, so the outbox retries with backoff. Events are
append-only in OTLP, so a redelivery can emit one twice: `tracing_eval.result.id` (deterministic)
and `tracing_eval.thread.version` let consumers keep one. Results with status `skipped` or
`not_applicable` are emitted too, with that status as `gen_ai.evaluation.score.label` and no score
value; errors carry `error.type` and no score. The schema is documented in docs/otel.md.
"""

from __future__ import annotations

import gzip
import os
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.logs.v1.logs_pb2 import ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.trace import TraceFlags
from opentelemetry.util.re import parse_env_headers

from tracing_eval.connectors.http_bodies import ReleasingClient
from tracing_eval.connectors.otlp.sink_settings import OtlpSinkSettings
from tracing_eval.delivery import Anchor, Delivery, ResultDelivery
from tracing_eval.settings_base import ConfigError
from tracing_eval.sinks import BaseSink, PermanentSinkError

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = "tracing-eval"
LOGS_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
HEADERS_ENV = "OTEL_EXPORTER_OTLP_HEADERS"
LOGS_HEADERS_ENV = "OTEL_EXPORTER_OTLP_LOGS_HEADERS"
COMPRESSION_ENV = "OTEL_EXPORTER_OTLP_COMPRESSION"
LOGS_COMPRESSION_ENV = "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION"
SDK_DISABLED_ENV = "OTEL_SDK_DISABLED"
CERTIFICATE_ENV = "OTEL_EXPORTER_OTLP_CERTIFICATE"
LOGS_CERTIFICATE_ENV = "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE"
LOGS_PATH = "/v1/logs"
OTHER_ERROR = "_OTHER"
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


class OtlpExportError(Exception):
    """The OTLP endpoint did not take the event; the outbox retries."""


def resolve_endpoint(configured: str | None, env: Mapping[str, str] | None = None) -> str:
    """The logs URL: config, else `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (as is), else
    `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs`. A configured URL without a path gets `/v1/logs`."""
    env = os.environ if env is None else env
    if configured:
        url = configured.strip()
        return url.rstrip("/") + LOGS_PATH if urlsplit(url).path in ("", "/") else url
    if logs := env.get(LOGS_ENDPOINT_ENV, "").strip():
        return logs
    if base := env.get(ENDPOINT_ENV, "").strip():
        return base.rstrip("/") + LOGS_PATH
    raise ConfigError(
        f"sink 'otlp' has no endpoint: set [sinks.otlp] endpoint, {LOGS_ENDPOINT_ENV} or {ENDPOINT_ENV} "
        "(e.g. http://127.0.0.1:4318)"
    )


def error_type(error: str | None) -> str:
    """`error.type`: the exception class name at the head of the error text, else `_OTHER`."""
    m = _ERROR_TYPE.match(error or "")
    return m.group(1) if m else OTHER_ERROR


def event_attributes(delivery: ResultDelivery) -> dict[str, Any]:
    """The event's attributes for one result delivery (None values left out)."""
    r, anchor = delivery.result, delivery.anchor
    status = r.status.value
    attrs: dict[str, Any] = {
        "gen_ai.evaluation.name": r.metric,
        "gen_ai.response.id": anchor.response_id,
        "tracing_eval.result.id": delivery.result_id,
        "tracing_eval.thread.key": delivery.thread_key,
        "tracing_eval.thread.version": delivery.thread_version,
        "tracing_eval.target": delivery.target,
        "tracing_eval.scope": r.scope.value,
        "tracing_eval.turn.index": r.turn_index,
        "tracing_eval.metric.version": r.metric_version,
        "tracing_eval.status": status,
        "tracing_eval.judge.model": r.judge_model,
    }
    if r.turn_index is None:
        attrs["gen_ai.conversation.id"] = anchor.conversation_id
    if status == "ok":
        attrs["gen_ai.evaluation.score.value"] = float(r.score) if r.score is not None else None
        attrs["gen_ai.evaluation.score.label"] = r.label or (None if r.passed is None else _verdict(r.passed))
        attrs["gen_ai.evaluation.explanation"] = r.reason or None
        attrs["tracing_eval.passed"] = r.passed
        attrs["tracing_eval.threshold"] = float(r.threshold) if r.threshold is not None else None
    elif status == "error":
        attrs["error.type"] = error_type(r.error)
        attrs["gen_ai.evaluation.explanation"] = r.error or r.reason or None
    else:  # skipped, not_applicable: no score, the status is the label
        attrs["gen_ai.evaluation.score.label"] = status
        attrs["gen_ai.evaluation.explanation"] = r.reason or None
    return {k: v for k, v in attrs.items() if v is not None}


def _verdict(passed: bool) -> str:
    return "pass" if passed else "fail"


def _set_value(target: AnyValue, value: Any) -> None:
    """Write an attribute value into OTLP `AnyValue` (event attributes are str, bool, int or float)."""
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    else:
        target.string_value = str(value)


def _ids(anchor: Anchor) -> tuple[bytes, bytes]:
    """The anchor's trace and span ids as bytes; empty when they are not valid OTel ids."""
    trace_hex, span_hex = anchor.trace_id or "", anchor.span_id or ""
    try:
        trace_id, span_id = bytes.fromhex(trace_hex), bytes.fromhex(span_hex)
    except ValueError:
        return b"", b""
    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
        return b"", b""
    return trace_id, span_id


def add_record(scope: ScopeLogs, attributes: dict[str, Any], anchor: Anchor, now_ns: int) -> None:
    """Append one evaluation event as the OTLP log record the SDK's Logs API and exporter would send
    for it: parented to the anchor's span (sampled) when its ids are valid, an empty body, observed
    now. (Filled in place: upb builds nested messages fastest that way.)"""
    trace_id, span_id = _ids(anchor)
    record = scope.log_records.add(
        time_unix_nano=now_ns,
        observed_time_unix_nano=now_ns,
        flags=int(TraceFlags.SAMPLED) if trace_id else 0,
        trace_id=trace_id,
        span_id=span_id,
        event_name=EVENT_NAME,
    )
    record.body.SetInParent()
    pairs = record.attributes
    for key, value in attributes.items():
        _set_value(pairs.add(key=key).value, value)


def _resource(service_name: str) -> ProtoResource:
    """The SDK's resource (`service.name`, `telemetry.sdk.*`, what `OTEL_RESOURCE_ATTRIBUTES` adds) in OTLP form."""
    out = ProtoResource()
    for key, value in Resource.create({SERVICE_NAME: service_name}).attributes.items():
        _set_value(out.attributes.add(key=key).value, value)
    return out


def _headers(configured: dict[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_LOGS_HEADERS`, then the configured ones (last wins)."""
    env = os.environ if env is None else env
    headers: dict[str, str] = {}
    for name in (HEADERS_ENV, LOGS_HEADERS_ENV):
        headers.update({k.lower(): v for k, v in parse_env_headers(env.get(name, ""), liberal=True).items()})
    headers.update({k.lower(): v for k, v in configured.items()})
    return {**headers, "content-type": "application/x-protobuf"}


def _gzip(env: Mapping[str, str] | None = None) -> bool:
    """Whether `OTEL_EXPORTER_OTLP_LOGS_COMPRESSION` (else `OTEL_EXPORTER_OTLP_COMPRESSION`) asks for gzip."""
    env = os.environ if env is None else env
    value = env.get(LOGS_COMPRESSION_ENV) or env.get(COMPRESSION_ENV) or ""
    return value.strip().lower() == "gzip"


def tls_verify(env: Mapping[str, str] | None = None) -> ssl.SSLContext | bool:
    """Server verification: the CA file of `OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE` (else
    `OTEL_EXPORTER_OTLP_CERTIFICATE`) when set, else the default trust store."""
    env = os.environ if env is None else env
    for name in (LOGS_CERTIFICATE_ENV, CERTIFICATE_ENV):
        path = env.get(name, "").strip()
        if path:
            try:
                return ssl.create_default_context(cafile=path)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"sink 'otlp': {name}={path!r} is not a readable CA file ({exc})") from exc
    return True


class OtlpEvaluationSink(BaseSink):
    """`Sink` named `otlp`: delivers `result` payloads as evaluation events (review items are ignored)."""

    name = "otlp"
    kinds = frozenset({"result"})
    batch = True

    def __init__(self, settings: OtlpSinkSettings) -> None:
        if os.environ.get(SDK_DISABLED_ENV, "").strip().lower() == "true":
            raise ConfigError("sink 'otlp' cannot emit: the OpenTelemetry SDK is disabled (OTEL_SDK_DISABLED)")
        self.endpoint = resolve_endpoint(settings.endpoint)
        self._resource = _resource(settings.service_name)
        self._scope = InstrumentationScope(name=SCOPE)
        self._gzip = _gzip()
        headers = _headers(settings.headers)
        if self._gzip:
            headers["content-encoding"] = "gzip"
        self._client = ReleasingClient(headers=headers, timeout=settings.timeout_seconds, verify=tls_verify())

    def encode(self, deliveries: Sequence[Delivery], now_ns: int) -> bytes:
        """The export request for the results among `deliveries`, serialised (empty when none)."""
        request = ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add()
        resource_logs.resource.CopyFrom(self._resource)
        scope = resource_logs.scope_logs.add()
        scope.scope.CopyFrom(self._scope)
        for d in deliveries:
            if isinstance(d, ResultDelivery):
                add_record(scope, event_attributes(d), d.anchor, now_ns)
        return request.SerializeToString() if scope.log_records else b""

    async def deliver(self, delivery: Delivery) -> None:
        """Export one result event; raise when the endpoint did not take it."""
        await self.deliver_batch([delivery])

    async def deliver_batch(self, deliveries: Sequence[Delivery]) -> None:
        """Export the result events of a batch in one request; raise when the endpoint did not take
        them (the outbox then retries the whole batch)."""
        try:
            body = self.encode(deliveries, time.time_ns())
        except Exception as exc:  # a payload that cannot become an event never will
            raise PermanentSinkError(f"cannot build the evaluation event: {type(exc).__name__}: {exc}") from exc
        if not body:
            return
        if self._gzip:
            body = gzip.compress(body)
        try:
            response = await self._client.post(self.endpoint, content=body)
        except httpx.HTTPError as exc:
            raise OtlpExportError(f"OTLP export to {self.endpoint} failed: {type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            raise OtlpExportError(f"OTLP export to {self.endpoint} failed: HTTP {response.status_code}")

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
