"""The one assembly point: a configured app (store, judge, sinks, sources, pipeline) from `Settings`.

Sources and sinks are chosen by name from the registries (`tracing_eval.registry`, fed by entry
points), so this module builds them without knowing any of them. It is the only module of the
engine that imports `connectors`, and only for the commands that speak to Langfuse itself (the
`doctor` check, scenarios from its review queue, calibration against its reviewers' scores).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from tracing_eval import registry
from tracing_eval.config import ConfigError, Settings
from tracing_eval.judge import JudgeCache, JudgeClient, JudgeObserver
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.pipeline import Pipeline
from tracing_eval.routing import unknown_destinations
from tracing_eval.sinks import LOCAL, Sink
from tracing_eval.sources import Source
from tracing_eval.store.base import Store
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class SourceSpec:
    """One source as `--source` names it: `NAME` or `NAME:ARGUMENT` (`otlp-file:traces.jsonl`)."""

    name: str
    argument: str | None = None

    def __str__(self) -> str:
        return f"{self.name}:{self.argument}" if self.argument is not None else self.name

    @property
    def entry(self) -> registry.SourceEntry:
        return registry.source(self.name)


def source_specs(specs: Sequence[str] | None, settings: Settings) -> list[SourceSpec]:
    """`--source` specs (or the configured sources) checked against the registry; unknown names and
    a missing or unexpected argument are errors."""
    found: list[SourceSpec] = []
    for spec in dict.fromkeys(list(specs) if specs else settings.sources.specs()):
        name, colon, argument = spec.partition(":")
        if name not in registry.sources():
            raise ConfigError(f"unknown source {spec!r}; known sources: {registry.source_specs()}")
        entry = registry.source(name)
        if entry.argument and not argument:
            raise ConfigError(f"source {name} needs an argument: {name}:{entry.argument}")
        if not entry.argument and colon:
            raise ConfigError(f"source {name} takes no argument, got {spec!r}")
        found.append(SourceSpec(name, argument or None))
    return found


def sink_names(names: Sequence[str] | None, settings: Settings, sources: Sequence[SourceSpec]) -> list[str]:
    """The sinks to run: `--sink` (or the configured ones), plus those the sources imply (Langfuse:
    scores go back where the threads were read). Every review route must reach a sink that takes
    review items."""
    wanted = list(dict.fromkeys(list(names) if names else list(settings.sinks.enabled)))
    for spec in sources:
        wanted += [name for name in spec.entry.sinks if name not in wanted]
    known = [LOCAL, *registry.sinks()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ConfigError(f"unknown or unavailable sink(s) {', '.join(unknown)}; available: {', '.join(known)}")
    reviewing = [n for n in wanted if n != LOCAL and "review" in registry.sink(n).kinds]
    dangling = unknown_destinations(settings.review, reviewing)
    if dangling:
        routes = "; ".join(f"{name}: {', '.join(dests)}" for name, dests in dangling.items())
        raise ConfigError(f"review routes send to sinks that are not enabled ({routes}); enable them with --sink")
    return wanted


def outbox_sinks(names: Sequence[str]) -> dict[str, list[str]]:
    """The sinks delivered through the outbox (all but `local`), with the payload kinds each takes."""
    return {n: sorted(registry.sink(n).kinds) for n in names if n != LOCAL}


def build_sinks(names: Sequence[str], settings: Settings, store: Store) -> list[Sink]:
    """Sink objects by name; `local` (the store and its review queue) needs no outbox."""
    context = registry.SinkContext(settings, store)
    built = []
    for name in names:
        if name != LOCAL:
            entry = registry.sink(name)
            sink = entry.build(context)
            if sink.name != name:  # the outbox keys rows by the registered name
                raise registry.RegistryError(f"the sink registered as {name!r} calls itself {sink.name!r}")
            if sink.kinds != entry.kinds:  # routing was checked against the registered kinds
                raise registry.RegistryError(
                    f"the sink {name!r} takes {sorted(sink.kinds)} but is registered for {sorted(entry.kinds)}"
                )
            built.append(sink)
    return built


def build_sources(
    specs: Sequence[SourceSpec],
    settings: Settings,
    store: Store,
    *,
    complete: bool,
    since: datetime | None = None,
    telemetry: Telemetry | None = None,
    sinks: Sequence[str] = (),
) -> list[Source]:
    """Source objects by spec; `complete`: the input is finished (`run --once`)."""
    return [
        spec.entry.build(
            registry.SourceContext(
                settings,
                store,
                argument=spec.argument,
                complete=complete,
                since=since,
                telemetry=telemetry,
                outbox_sinks=outbox_sinks(sinks),
            )
        )
        for spec in specs
    ]


def build_store(settings: Settings) -> SqlStore:
    return SqlStore(settings.store.url, sample_rate=settings.sampling.rate)


def build_judge(
    settings: Settings, cache: JudgeCache | None = None, observer: JudgeObserver | None = None
) -> JudgeClient | None:
    """The judge client when a model and an API key are configured, else None (judge tier off)."""
    return JudgeClient.from_settings(settings.judge, cache, observer)


def build_pipeline(
    settings: Settings,
    store: SqlStore,
    sources: Sequence[SourceSpec],
    sinks: Sequence[str],
    *,
    complete: bool,
    since: datetime | None = None,
    telemetry: Telemetry | None = None,
) -> Pipeline:
    """Everything one worker needs, wired from settings; close it with `Pipeline.close()`.
    With `telemetry`, the pipeline, its judge, its deliveries and its sources report to it."""
    metrics = build_metrics(settings)
    built_sinks = build_sinks(sinks, settings, store)
    built_sources = build_sources(
        sources, settings, store, complete=complete, since=since, telemetry=telemetry, sinks=sinks
    )
    judge = build_judge(settings, cache=store if settings.judge.cache else None, observer=telemetry)
    pipeline = Pipeline(
        store=store,
        settings=settings,
        metrics=metrics,
        owner=f"{socket.gethostname()}:{os.getpid()}",
        sources=built_sources,
        sinks=built_sinks,
        judge=judge,
        telemetry=telemetry,
    )
    if telemetry is not None:
        telemetry.prime(sinks=pipeline.outbox_sinks, sources=[s.name for s in built_sources])
    return pipeline


@asynccontextmanager
async def assemble(
    settings: Settings,
    sources: Sequence[SourceSpec],
    sinks: Sequence[str],
    *,
    once: bool,
    since: datetime | None = None,
    telemetry: Telemetry | None = None,
) -> AsyncIterator[Pipeline]:
    """The store opened and the pipeline built over it, closed again on the way out. `once`: one run
    over finished input (`run --once`, `backfill`), so sources that only listen are left out."""
    store = build_store(settings)
    await store.open()
    for problem in await store.maintenance_problems():
        log.warning("store maintenance", problem=problem)
    pipeline = None
    try:
        wanted = [s for s in sources if not (once and s.entry.listens)]
        pipeline = build_pipeline(settings, store, wanted, sinks, complete=once, since=since, telemetry=telemetry)
        yield pipeline
    finally:
        if pipeline is not None:
            await pipeline.close()
        await store.close()


# -- the commands that speak to Langfuse itself --------------------------------------------------


def langfuse_keys_set(settings: Settings) -> bool:
    """Whether the Langfuse keys are set (in `[langfuse]` or the SDK's variables)."""
    from tracing_eval.connectors.langfuse.settings import LangfuseSettings

    return settings.section(LangfuseSettings).enabled


async def check_langfuse(settings: Settings) -> tuple[bool, str]:
    """`doctor`: whether Langfuse answers with these keys, and what it said (or what to set)."""
    from tracing_eval.connectors.langfuse import LangfuseClient
    from tracing_eval.connectors.langfuse.settings import LangfuseSettings

    section = settings.section(LangfuseSettings)
    try:
        client = LangfuseClient(section)
    except ConfigError as exc:  # the message names the variables to set
        return False, str(exc)
    except Exception as exc:
        return False, f"{exc} (set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_BASE_URL)"
    try:
        generation = await client.generation()
        project = await client.project_id()
        return True, f"{section.host}: project {project}, read API {generation}"
    except Exception as exc:
        return False, f"{exc} (check the keys and LANGFUSE_BASE_URL)"
    finally:
        await client.aclose()


async def langfuse_failed_threads(settings: Settings, selection: Any) -> list[Any]:
    """`scenarios export --from langfuse`: the failed threads of the Langfuse review queue."""
    from tracing_eval.connectors.langfuse.client import LangfuseError
    from tracing_eval.connectors.langfuse.review_sessions import ReviewQueueError, ReviewSessions
    from tracing_eval.connectors.langfuse.settings import LangfuseSettings

    try:
        reader = ReviewSessions(settings.section(LangfuseSettings))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        return list(await reader.failed_threads(selection))
    except (LangfuseError, ReviewQueueError) as exc:
        raise ConfigError(f"Langfuse: {exc}") from None
    finally:
        await reader.aclose()


async def langfuse_reviewed(settings: Settings, human_name: str, metric: str, start: datetime) -> list[Any]:
    """`calibrate --source langfuse`: what reviewers scored as `human_name` since `start`, each with
    this project's `metric` score on it (`tracing_eval.connectors.langfuse.annotations.Subject`)."""
    from tracing_eval.connectors.langfuse.annotations import human_and_ours
    from tracing_eval.connectors.langfuse.client import LangfuseClient, LangfuseError
    from tracing_eval.connectors.langfuse.settings import LangfuseSettings

    try:
        client = LangfuseClient(settings.section(LangfuseSettings))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        return list(await human_and_ours(client, human_name, metric, start))
    except LangfuseError as exc:
        raise ConfigError(f"Langfuse: {exc}") from None
    finally:
        await client.aclose()
