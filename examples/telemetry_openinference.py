"""Variant (b): `openinference-instrumentation-openai` plus OpenInference AGENT and TOOL spans for the app.

Each user turn runs under `using_session(conversation_id)` inside an AGENT span (`input.value` is
the user's text, `output.value` the answer); each tool execution is a TOOL span whose failure is
recorded as an `exception` event and status ERROR by the tracer (success sets status OK, as the
tracer's decorators do). Spans go out uncompressed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from openinference.instrumentation import OITracer, TracerProvider, using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.semconv.trace import OpenInferenceMimeTypeValues, SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode
from support_bot import AGENT_NAME, TOOL_SCHEMAS

ENV: dict[str, str] = {}


@dataclass
class _Turn:
    span: Any  # OpenInferenceSpan

    def answer(self, text: str) -> None:
        self.span.set_output(text, mime_type=OpenInferenceMimeTypeValues.TEXT)


@dataclass
class _Tool:
    span: Any

    def result(self, value: Any) -> None:
        self.span.set_output(value)


class OpenInferenceTelemetry:
    """AGENT and TOOL spans from an `OITracer`; LLM spans come from the OpenAI instrumentor."""

    def __init__(self, tracer: OITracer) -> None:
        self.tracer = tracer

    @contextmanager
    def turn(self, conversation_id: str, user_text: str) -> Iterator[_Turn]:
        with (
            using_session(conversation_id),
            self.tracer.start_as_current_span(
                AGENT_NAME, openinference_span_kind="agent", attributes={SpanAttributes.AGENT_NAME: AGENT_NAME}
            ) as span,
        ):
            span.set_input(user_text, mime_type=OpenInferenceMimeTypeValues.TEXT)
            yield _Turn(span)
            span.set_status(Status(StatusCode.OK))

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[_Tool]:
        schema = TOOL_SCHEMAS[name]
        with self.tracer.start_as_current_span(
            name, openinference_span_kind="tool", attributes={SpanAttributes.TOOL_ID: call_id}
        ) as span:
            span.set_tool(name=name, description=schema["description"], parameters=schema["parameters"])
            span.set_input(arguments)
            yield _Tool(span)
            span.set_status(Status(StatusCode.OK))  # as the tracer's @tool decorator does


@dataclass
class Pipeline:
    tracer_provider: TracerProvider

    def flush(self) -> None:
        self.tracer_provider.force_flush()

    def shutdown(self) -> None:
        OpenAIInstrumentor().uninstrument()
        self.tracer_provider.shutdown()


def setup(endpoint: str, resource: Resource) -> tuple[OpenInferenceTelemetry, Pipeline]:
    """Batch-export spans to `endpoint` (OTLP/HTTP protobuf, no compression) and instrument `openai`."""
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    tracer = tracer_provider.get_tracer(AGENT_NAME, "1.0.0")
    return OpenInferenceTelemetry(tracer), Pipeline(tracer_provider)
