"""A sink from another package: every evaluation result as one JSON line in a file.

Registered in this package's pyproject.toml under the entry-point group `tracing_eval.sinks` as
`example`; its settings are the `[sinks.example]` section (env `TRACING_EVAL_SINKS__EXAMPLE__PATH`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tracing_eval.delivery import Delivery
from tracing_eval.registry import Section, SinkContext, SinkEntry
from tracing_eval.settings_base import SettingsSection
from tracing_eval.sinks import BaseSink


class ExampleSettings(SettingsSection):
    path: Path = Field(Path("results.jsonl"), description="File the results are appended to, one JSON line each.")


class JsonLinesSink(BaseSink):
    name = "example"
    kinds = frozenset({"result"})

    def __init__(self, settings: ExampleSettings) -> None:
        self.path = settings.path

    async def deliver(self, delivery: Delivery) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(delivery.model_dump_json() + "\n")


def build(ctx: SinkContext) -> JsonLinesSink:
    return JsonLinesSink(ctx.section(ExampleSettings))


SINK = SinkEntry(kinds=JsonLinesSink.kinds, build=build, settings=Section("sinks.example", ExampleSettings))
