"""Example app for the deploy/ stacks: the support bot of examples/, traced with OpenTelemetry GenAI.

It plays the seven scripted support conversations of `examples/conversations.py` (three good, four
with a defect tracing-eval finds) through `examples/support_bot.py`, round after round, each round
with new conversation ids. Every user turn is one trace: an `invoke_agent support-bot` span with
the OpenAI client's `chat` spans and the `execute_tool` spans under it, carrying the messages
(`gen_ai.input.messages` / `gen_ai.output.messages`, content capture on).

The model: without `OPENAI_BASE_URL`, the scripted fake OpenAI server of the test suite
(`tests/support/fakes/openai_server.py`) runs in this process on 127.0.0.1, so no key and no network are
needed and the answers (defects included) are always the same. With `OPENAI_BASE_URL` (and
`OPENAI_API_KEY`, `APP_MODEL`) the same user turns go to that endpoint, e.g. Ollama or vLLM.

Where the telemetry goes is set by the standard OpenTelemetry variables only:

- to the tracing-eval sidecar: `OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318` (spans to
  /v1/traces, GenAI log events to /v1/logs);
- to Langfuse: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://langfuse-web:3000/api/public/otel/v1/traces`,
  `OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Basic%20<base64 pk:sk>` and
  `OTEL_LOGS_EXPORTER=none` (Langfuse takes no OTLP logs; the spans carry the messages).

Other variables: `APP_ROUNDS` (rounds to play, 0 = until stopped; default 0), `APP_PAUSE_SECONDS`
(pause between rounds; default 60), `OTEL_SERVICE_NAME` (default `support-bot`).

    .venv/bin/python deploy/example-app/app.py     # needs the dev extras (make install-dev)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parents[2]  # the repository, or /app in the image
sys.path[:0] = [str(REPO), str(REPO / "examples")]

import openai  # noqa: E402
import support_bot  # noqa: E402
from conversations import CONVERSATIONS, scripts  # noqa: E402
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from opentelemetry.util.genai.handler import TelemetryHandler  # noqa: E402
from telemetry_genai import ENV as CONTENT_CAPTURE  # noqa: E402
from telemetry_genai import GenAITelemetry  # noqa: E402

from tests.support.fakes.openai_server import FakeOpenAIServer, ScriptedHandler  # noqa: E402


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through `finally`, so the exporters flush


def setup() -> tuple[GenAITelemetry, TracerProvider, LoggerProvider]:
    for key, value in CONTENT_CAPTURE.items():
        os.environ.setdefault(key, value)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", support_bot.AGENT_NAME)})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    logger_provider = LoggerProvider(resource=resource)
    if os.environ.get("OTEL_LOGS_EXPORTER", "otlp").strip().lower() != "none":
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    handler = TelemetryHandler(
        tracer_provider=tracer_provider,
        logger_provider=logger_provider,
        instrumentation_scope_name=support_bot.AGENT_NAME,
        instrumentation_scope_version="1.0.0",
    )
    return GenAITelemetry(handler), tracer_provider, logger_provider


def play_round(base_url: str, api_key: str, telemetry: GenAITelemetry, prefix: str, flush: Callable[[], None]) -> None:
    with openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=2) as client:
        for conv in CONVERSATIONS:
            support_bot.run_conversation(client, prefix + conv.id, list(conv.user_turns), telemetry, stream=conv.stream)
            flush()
            print(f"played {prefix}{conv.id} ({len(conv.user_turns)} turns)", flush=True)


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)
    rounds = int(os.environ.get("APP_ROUNDS", "0"))
    pause = float(os.environ.get("APP_PAUSE_SECONDS", "60"))
    support_bot.MODEL = os.environ.get("APP_MODEL", support_bot.MODEL)
    real_endpoint = os.environ.get("OPENAI_BASE_URL")
    telemetry, tracer_provider, logger_provider = setup()

    def flush() -> None:
        tracer_provider.force_flush()
        logger_provider.force_flush()

    run = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    played = 0
    try:
        while rounds <= 0 or played < rounds:
            played += 1
            prefix = f"demo-{run}-{played}/"
            if real_endpoint:
                play_round(real_endpoint, os.environ.get("OPENAI_API_KEY", ""), telemetry, prefix, flush)
            else:
                with FakeOpenAIServer(ScriptedHandler(scripts())) as llm:  # a fresh script per round
                    play_round(llm.base_url, "sk-example-not-a-key", telemetry, prefix, flush)
            if rounds <= 0 or played < rounds:
                time.sleep(pause)
    finally:
        OpenAIInstrumentor().uninstrument()
        tracer_provider.shutdown()
        logger_provider.shutdown()


if __name__ == "__main__":
    main()
