"""`run` (the sidecar, or one tick with `--once`) and `backfill` (Langfuse history)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tracing_eval.cli.common import (
    SINK_NAMES,
    SOURCE_SPECS,
    config_option,
    err,
    friendly_errors,
    out,
    settings_for,
    stored_records,
)
from tracing_eval.config import ConfigError, Settings
from tracing_eval.report import results_table, review_table
from tracing_eval.timespec import parse_since


@click.command()
@config_option
@click.option("--once", is_flag=True, help="Run one tick over the sources, treating all input as settled, then exit.")
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="SPEC",
    help=f"{SOURCE_SPECS} (repeatable; default: the configured ones).",
)
@click.option(
    "--sink",
    "sinks",
    multiple=True,
    metavar="NAME",
    help=f"Result sinks, {SINK_NAMES} (repeatable); local is always on.",
)
@click.option(
    "--http", "http", default=None, metavar="HOST:PORT", help="Address of the HTTP server (default 127.0.0.1:4318)."
)
@friendly_errors
def run(
    config_path: Path | None, once: bool, sources: tuple[str, ...], sinks: tuple[str, ...], http: str | None
) -> None:
    """Run the sidecar: receive and pull spans, evaluate ready threads, write results."""
    from tracing_eval import app

    overrides: dict[str, Any] = {}
    if http:
        overrides["http"] = {"address": http}
    settings = settings_for(config_path, **overrides)
    specs = app.source_specs(sources, settings)
    sink_list = app.sink_names(sinks, settings, specs)
    if once:
        if specs and all(s.entry.listens for s in specs):
            raise ConfigError(
                "`run --once` pulls sources; give --source otlp-file:PATH or langfuse (the receiver needs `run`)"
            )
        asyncio.run(_run_once(settings, specs, sink_list))
        return
    asyncio.run(_run_forever(settings, specs, sink_list))


async def _run_once(settings: Settings, specs: Any, sinks: list[str], since: Any = None) -> None:
    """One tick that treats all input as settled, then the tables of scores and the review queue."""
    from tracing_eval import app

    async with app.assemble(settings, specs, sinks, once=True, since=since) as pipeline:
        store = pipeline.store
        started = time.perf_counter()
        if since is not None:
            await _catch_up(pipeline.sources, store, since)
        stats = await pipeline.tick(settle_all=True)
        err().print(
            f"pulled {stats.spans_pulled} spans, evaluated {stats.threads_evaluated} threads "
            f"({stats.results} results, {stats.routed_to_review} routed to review, {stats.errors} errors; "
            f"delivered {stats.delivery.delivered}, retrying {stats.delivery.retried}) "
            f"in {time.perf_counter() - started:.2f}s"
        )
        records = await stored_records(store)
        out().print(results_table(records, width=out().width))
        out().print(review_table(await store.review_items("open")))


async def _run_forever(settings: Settings, specs: Any, sinks: list[str]) -> None:
    from tracing_eval import app, worker
    from tracing_eval.telemetry import Telemetry

    telemetry = Telemetry()  # this worker's Prometheus series, served on /metrics
    async with app.assemble(settings, specs, sinks, once=False, telemetry=telemetry) as pipeline:
        worker.tune_gc()  # the process is the sidecar's from here on
        await worker.Worker(settings, pipeline).run()


@click.command()
@config_option
@click.option("--since", required=True, help="How far back to read: a duration (90m, 24h, 7d, 2w) or an ISO time.")
@click.option(
    "--sink", "sinks", multiple=True, metavar="NAME", help=f"Extra result sinks, {SINK_NAMES} (langfuse is implied)."
)
@friendly_errors
def backfill(config_path: Path | None, since: str, sinks: tuple[str, ...]) -> None:
    """Read Langfuse history since a time, evaluate it, and write the scores back."""
    from tracing_eval import app

    settings = settings_for(config_path)
    try:
        start = parse_since(since)
    except ValueError as exc:
        raise ConfigError(f"--since: {exc}") from None
    specs = app.source_specs(["langfuse"], settings)
    err().print(f"backfilling Langfuse from {start.isoformat()} (read window by window, then evaluated)")
    asyncio.run(_run_once(settings, specs, app.sink_names(sinks, settings, specs), since=start))


async def _catch_up(sources: Any, store: Any, since: Any) -> None:
    """Pull each source with a history up to now (Langfuse: window by window), with a progress bar
    over the time range."""
    from tracing_eval.sources import CatchingUp

    total = max(1.0, time.time() - since.timestamp())
    for source in sources:
        if isinstance(source, CatchingUp):
            spans = await _catch_up_one(source, store, since, total)
            err().print(f"read {spans} spans from {source.name} since {since.isoformat()}")


async def _catch_up_one(source: Any, store: Any, since: Any, total: float) -> int:
    with Progress(
        TextColumn("backfill"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}% of the time range, {task.fields[spans]} spans"),
        TimeElapsedColumn(),
        console=err(),
        disable=not err().is_terminal,
    ) as progress:
        task = progress.add_task("backfill", total=total, spans=0)

        def advance(watermark: Any, spans: int) -> None:
            done = total if watermark is None else min(total, watermark.timestamp() - since.timestamp())
            progress.update(task, completed=done, spans=spans)

        return int(await source.catch_up(store, advance))
