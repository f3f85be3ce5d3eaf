"""The OTLP sink: each metric result as a `gen_ai.evaluation.result` event over OTLP/HTTP protobuf.

An event is an OTel log record with `event_name`, emitted through the SDK Logs API and exported by
`OTLPLogExporter`. A per-turn result is parented to the turn's root span (the record carries its
trace and span ids); a thread result to the last turn's root span, with `gen_ai.conversation.id`.

Delivery is confirmed before `deliver` returns: the record is exported on the spot (no batch queue
that could drop it) and a failed export raises, so the outbox retries with backoff. Events are
append-only in OTLP, so a redelivery can emit one twice: `tracing_eval.result.id` (deterministic)
and `tracing_eval.thread.version` let consumers keep one. Results with status `skipped` or
`not_applicable` are emitted too, with that status as `gen_ai.evaluation.score.label` and no score
value; errors carry `error.type` and no score. The schema is documented in docs/otel.md.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.trace import INVALID_SPAN, NonRecordingSpan, SpanContext, TraceFlags

from tracing_eval.config import ConfigError, OtlpSinkSettings
from tracing_eval.sinks import PermanentSinkError

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = "tracing-eval"
LOGS_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
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


def parent_context(anchor: dict[str, Any]) -> Context:
    """A context whose current span is the anchor's span; without OTel ids, an explicitly empty one
    (so the event never picks up whatever span happens to be current in the worker)."""
    trace_hex, span_hex = anchor.get("trace_id") or "", anchor.get("span_id") or ""
    try:
        trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    except ValueError:
        trace_id = span_id = 0
    if len(trace_hex) != 32 or len(span_hex) != 16 or not trace_id or not span_id:
        return trace.set_span_in_context(INVALID_SPAN)
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def event_attributes(payload: dict[str, Any]) -> dict[str, Any]:
    """The event's attributes for one `result` outbox payload (None values left out)."""
    r = payload["result"]
    anchor = payload.get("anchor") or {}
    status = r.get("status", "ok")
    attrs: dict[str, Any] = {
        "gen_ai.evaluation.name": r["metric"],
        "gen_ai.response.id": anchor.get("response_id"),
        "tracing_eval.result.id": payload["result_id"],
        "tracing_eval.thread.key": payload["thread_key"],
        "tracing_eval.thread.version": payload["thread_version"],
        "tracing_eval.target": payload["target"],
        "tracing_eval.scope": r.get("scope"),
        "tracing_eval.turn.index": r.get("turn_index"),
        "tracing_eval.metric.version": r.get("metric_version"),
        "tracing_eval.status": status,
        "tracing_eval.judge.model": r.get("judge_model"),
    }
    if r.get("turn_index") is None:
        attrs["gen_ai.conversation.id"] = anchor.get("conversation_id")
    if status == "ok":
        score = r.get("score")
        attrs["gen_ai.evaluation.score.value"] = float(score) if score is not None else None
        passed = r.get("passed")
        attrs["gen_ai.evaluation.score.label"] = r.get("label") or (None if passed is None else _verdict(passed))
        attrs["gen_ai.evaluation.explanation"] = r.get("reason") or None
        attrs["tracing_eval.passed"] = passed
        attrs["tracing_eval.threshold"] = float(r["threshold"]) if r.get("threshold") is not None else None
    elif status == "error":
        attrs["error.type"] = error_type(r.get("error"))
        attrs["gen_ai.evaluation.explanation"] = r.get("error") or r.get("reason") or None
    else:  # skipped, not_applicable: no score, the status is the label
        attrs["gen_ai.evaluation.score.label"] = status
        attrs["gen_ai.evaluation.explanation"] = r.get("reason") or None
    return {k: v for k, v in attrs.items() if v is not None}


def _verdict(passed: bool) -> str:
    return "pass" if passed else "fail"


class _Capture(LogRecordProcessor):
    """Holds emitted records until the sink exports them itself and checks the result."""

    def __init__(self) -> None:
        self.records: list[ReadWriteLogRecord] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.records.append(log_record)

    def take(self) -> list[ReadableLogRecord]:
        taken, self.records = self.records, []
        return [
            ReadableLogRecord(
                log_record=r.log_record, resource=r.resource, instrumentation_scope=r.instrumentation_scope
            )
            for r in taken
            if r.resource is not None
        ]

    def shutdown(self) -> None:
        self.records = []

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class OtlpEvaluationSink:
    """`Sink` named `otlp`: delivers `result` payloads as evaluation events (review items are ignored)."""

    name = "otlp"
    kinds = frozenset({"result"})

    def __init__(self, settings: OtlpSinkSettings, *, exporter: LogRecordExporter | None = None) -> None:
        self.endpoint = resolve_endpoint(settings.endpoint)
        self._exporter = exporter or OTLPLogExporter(
            endpoint=self.endpoint, headers=settings.headers or None, timeout=settings.timeout_seconds
        )
        self._capture = _Capture()
        self._provider = LoggerProvider(
            resource=Resource.create({SERVICE_NAME: settings.service_name}), shutdown_on_exit=False
        )
        self._provider.add_log_record_processor(self._capture)
        self._logger = self._provider.get_logger(SCOPE)
        if not self._logger.enabled(event_name=EVENT_NAME):
            raise ConfigError("sink 'otlp' cannot emit: the OpenTelemetry SDK is disabled (OTEL_SDK_DISABLED)")
        self._lock = threading.Lock()

    async def deliver(self, kind: str, payload: dict[str, Any]) -> None:
        """Emit and export one result event; raise when the endpoint did not take it."""
        await self.deliver_batch([(kind, payload)])

    async def deliver_batch(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Emit the result events of a batch and export them in one request; raise when the endpoint
        did not take them (the outbox then retries the whole batch)."""
        try:
            events = [
                (event_attributes(p), parent_context(p.get("anchor") or {})) for kind, p in items if kind == "result"
            ]
        except Exception as exc:  # a payload that cannot become an event never will
            raise PermanentSinkError(f"cannot build the evaluation event: {type(exc).__name__}: {exc}") from exc
        if events:
            await asyncio.to_thread(self._emit_and_export, events)

    def _emit_and_export(self, events: list[tuple[dict[str, Any], Context]]) -> None:
        with self._lock:
            for attributes, context in events:
                self._logger.emit(
                    timestamp=time.time_ns(), context=context, event_name=EVENT_NAME, attributes=attributes
                )
            records: Sequence[ReadableLogRecord] = self._capture.take()
            if len(records) != len(events):
                raise OtlpExportError("the evaluation events were not emitted (logger disabled)")
            if self._exporter.export(records) is not LogRecordExportResult.SUCCESS:
                raise OtlpExportError(f"OTLP export to {self.endpoint} failed (see the exporter's log for the status)")

    async def close(self) -> None:
        """Shut the exporter and the logger provider down."""
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        self._provider.shutdown()
        self._exporter.shutdown()
