"""Build OTLP payloads the way the real SDK exporters encode them (shared by tests and bench)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from examples.otlp_capture import ids_to_hex


def genai_turn_spans(
    conversation: str,
    user: str,
    answer: str,
    history: list[dict[str, Any]] | None = None,
    tool_error: str | None = None,
) -> Any:
    """One turn as the OTel GenAI instrumentation records it: invoke_agent root, chat child, optional tool."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    messages = list(history or []) + [{"role": "user", "parts": [{"type": "text", "content": user}]}]
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": conversation,
            "gen_ai.agent.name": "support",
        },
    ):
        if tool_error is not None:
            with tracer.start_as_current_span(
                "execute_tool lookup_order",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup_order",
                    "gen_ai.tool.call.id": "call_1",
                    "error.type": "LookupError",
                },
            ) as tool:
                tool.set_status(Status(StatusCode.ERROR, tool_error))
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.conversation.id": conversation,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "system", "parts": [{"type": "text", "content": "You are a support bot."}]}] + messages
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
                ),
                "gen_ai.usage.input_tokens": 42,
                "gen_ai.usage.output_tokens": 7,
            },
        ):
            pass
    provider.shutdown()
    return exporter.get_finished_spans()


def trace_request(spans: Any) -> Any:
    return encode_spans(spans)


def details_log_request(trace_id: int, span_id: int, user: str, answer: str) -> Any:
    """A `gen_ai.client.inference.operation.details` log event parented to a span, encoded by the SDK."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    ctx = trace.set_span_in_context(
        NonRecordingSpan(SpanContext(trace_id, span_id, True, TraceFlags(TraceFlags.SAMPLED)))
    )
    provider.get_logger("test").emit(
        context=ctx,
        event_name="gen_ai.client.inference.operation.details",
        attributes={
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": user}]}],
            "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}],
        },
    )
    provider.shutdown()
    return encode_logs(exporter.get_finished_logs())


def to_otlp_json(message: Any) -> dict[str, Any]:
    """OTLP/JSON as exporters send it: lowerCamelCase, hex ids, integer enums."""
    return ids_to_hex(json_format.MessageToDict(message))


def minimal_spans(n: int, seed: int = 0) -> bytes:
    """A trace export of `n` spans (ten per trace) with nothing but ids, a one-letter name and a start
    time: the most spans per byte of protobuf, so the most memory per byte once parsed."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

    spans = [
        PbSpan(
            trace_id=(seed * 10**9 + i // 10 + 1).to_bytes(16, "big"),
            span_id=(seed * 10**9 + i + 1).to_bytes(8, "big"),
            name="s",
            start_time_unix_nano=1_767_225_600_000_000_000 + i,
        )
        for i in range(n)
    ]
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    return request.SerializeToString()
