"""Variant (a): `opentelemetry-instrumentation-genai-openai` plus `opentelemetry-util-genai` spans for the app.

Each user turn is an `invoke_agent support-bot` span opened by util-genai's `TelemetryHandler`
with the conversation id, which the instrumented `chat` spans inherit from the context; each
tool execution is an `execute_tool {name}` span. Content capture and the details log event are
configured by environment (see `ENV`), which must be set before `setup()` runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.invocation import LocalAgentInvocation, ToolInvocation
from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart
from support_bot import AGENT_NAME, MODEL, SYSTEM_PROMPT, TOOL_SCHEMAS

ENV = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
    "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": "true",
}


@dataclass
class _Turn:
    invocation: LocalAgentInvocation

    def answer(self, text: str) -> None:
        self.invocation.output_messages = [
            OutputMessage(role="assistant", parts=[TextPart(content=text)], finish_reason="stop")
        ]
        self.invocation.finish_reasons = ["stop"]


@dataclass
class _Tool:
    invocation: ToolInvocation

    def result(self, value: Any) -> None:
        self.invocation.tool_result = value


class GenAITelemetry:
    """Turn and tool spans through util-genai; chat spans come from the OpenAI instrumentor."""

    def __init__(self, handler: TelemetryHandler) -> None:
        self.handler = handler

    @contextmanager
    def turn(self, conversation_id: str, user_text: str) -> Iterator[_Turn]:
        with self.handler.invoke_local_agent(
            agent_name=AGENT_NAME, request_model=MODEL, conversation_id=conversation_id
        ) as invocation:
            invocation.system_instruction = [TextPart(content=SYSTEM_PROMPT)]
            invocation.input_messages = [InputMessage(role="user", parts=[TextPart(content=user_text)])]
            yield _Turn(invocation)

    @contextmanager
    def tool(self, name: str, call_id: str, arguments: dict[str, Any]) -> Iterator[_Tool]:
        with self.handler.tool(name, tool_type="function", agent_name=AGENT_NAME) as invocation:
            invocation.tool_call_id = call_id
            invocation.tool_description = TOOL_SCHEMAS[name]["description"]
            invocation.arguments = arguments
            yield _Tool(invocation)


@dataclass
class Pipeline:
    tracer_provider: TracerProvider
    logger_provider: LoggerProvider

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()

    def shutdown(self) -> None:
        OpenAIInstrumentor().uninstrument()
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


def setup(endpoint: str, resource: Resource) -> tuple[GenAITelemetry, Pipeline]:
    """Batch-export spans and logs to `endpoint` (OTLP/HTTP protobuf, gzip) and instrument `openai`."""
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", compression=Compression.Gzip))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", compression=Compression.Gzip))
    )
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    handler = TelemetryHandler(
        tracer_provider=tracer_provider,
        logger_provider=logger_provider,
        instrumentation_scope_name=AGENT_NAME,
        instrumentation_scope_version="1.0.0",
    )
    return GenAITelemetry(handler), Pipeline(tracer_provider, logger_provider)
