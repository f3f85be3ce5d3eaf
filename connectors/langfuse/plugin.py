"""What the Langfuse connector registers (pyproject.toml, entry points): the source and the score
sink, which share the `[langfuse]` section. Each part is imported when it is built, so the settings
load without the `langfuse` extra."""

from __future__ import annotations

from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.registry import Section, SinkContext, SinkEntry, SourceContext, SourceEntry
from tracing_eval.sinks import Sink
from tracing_eval.sources import Source

NAME = "langfuse"  # of the source and the sink (tracing_eval.connectors.langfuse.mapping.SOURCE)

SECTION = Section("langfuse", LangfuseSettings)


def _source(ctx: SourceContext) -> Source:
    from tracing_eval.connectors.langfuse.source import LangfuseSource

    return LangfuseSource(ctx.section(LangfuseSettings), backfill_since=ctx.since)


def _sink(ctx: SinkContext) -> Sink:
    from tracing_eval.connectors.langfuse.sink import LangfuseSink

    return LangfuseSink(ctx.section(LangfuseSettings))


#: Scores of what it reads go back to Langfuse: reading implies the sink of the same name
SOURCE = SourceEntry(build=_source, settings=SECTION, sinks=(NAME,))
SINK = SinkEntry(kinds=frozenset({"result", "review"}), build=_sink, settings=SECTION)
