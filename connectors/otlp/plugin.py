"""What the OTLP connector registers (pyproject.toml, entry points): the receiver and JSON-lines files
as sources, the evaluation-event sink. Light on purpose: each part is imported when it is built."""

from __future__ import annotations

from pathlib import Path

from tracing_eval.connectors.otlp.sink_settings import OtlpSinkSettings
from tracing_eval.registry import Section, SinkContext, SinkEntry, SourceContext, SourceEntry
from tracing_eval.settings_base import ConfigError
from tracing_eval.sinks import Sink
from tracing_eval.sources import Source


def _receiver(ctx: SourceContext) -> Source:
    from tracing_eval.connectors.otlp.receiver import OtlpReceiverSource

    return OtlpReceiverSource(ctx.store, ctx.settings.receiver, telemetry=ctx.telemetry, sinks=list(ctx.outbox_sinks))


def _file(ctx: SourceContext) -> Source:
    from tracing_eval.connectors.otlp.file_source import OtlpFileSource

    if not ctx.argument:
        raise ConfigError("source otlp-file needs a path: otlp-file:PATH")
    path = Path(ctx.argument)
    if ctx.complete and not path.is_file():  # `run` waits for a file to appear; a one-off run has nothing to wait for
        raise ConfigError(f"source otlp-file: no such file: {path}")
    return OtlpFileSource(path, complete=ctx.complete)


def _sink(ctx: SinkContext) -> Sink:
    from tracing_eval.connectors.otlp.sink import OtlpEvaluationSink

    return OtlpEvaluationSink(ctx.section(OtlpSinkSettings))  # a missing endpoint is a ConfigError


RECEIVER = SourceEntry(build=_receiver, listens=True)
FILE = SourceEntry(build=_file, argument="PATH")
SINK = SinkEntry(kinds=frozenset({"result"}), build=_sink, settings=Section("sinks.otlp", OtlpSinkSettings))
