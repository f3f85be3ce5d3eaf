"""An OpenTelemetry tracer provider that exports to the capture endpoint (for apps that bring none)."""

from __future__ import annotations

import os

from common import traces_endpoint
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def tracer_provider() -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": os.environ["OTEL_SERVICE_NAME"]}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint())))
    return provider
