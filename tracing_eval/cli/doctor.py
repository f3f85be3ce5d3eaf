"""`doctor`: check the configuration, the store, the sources, the sinks and the judge, one line each."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from tracing_eval.cli.common import SINK_NAMES, SOURCE_SPECS, config_option, err, missing_extra, out, settings_for
from tracing_eval.config import ConfigError
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.store.sql import SqlStore, StoreError


@click.command()
@config_option
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="SPEC",
    help=f"Sources to check, {SOURCE_SPECS} (default: the configured ones).",
)
@click.option(
    "--sink",
    "sinks",
    multiple=True,
    metavar="NAME",
    help=f"Sinks to check, {SINK_NAMES} (default: the configured ones).",
)
def doctor(config_path: Path | None, sources: tuple[str, ...], sinks: tuple[str, ...]) -> None:
    """Check the configuration, the store, the sources, the sinks and the judge; exit 1 if anything is wrong."""
    from tracing_eval import app, server

    problems = 0

    def report(ok: bool, what: str, detail: str) -> None:
        nonlocal problems
        problems += not ok
        mark = "[green]ok[/green]  " if ok else "[red]FAIL[/red]"
        out().print(f"{mark} {escape(what)}: {escape(detail)}")

    plan_langfuse = "langfuse" in sources
    try:
        settings = settings_for(config_path)
        plan_langfuse = plan_langfuse or "langfuse" in settings.sources.specs()
        report(True, "config", str(config_path or "defaults, environment and ./tracing-eval.toml if present"))
    except ConfigError as exc:
        report(False, "config", str(exc))
        sys.exit(1)

    async def check_langfuse() -> None:
        try:
            ok, detail = await app.check_langfuse(settings)
        except ModuleNotFoundError as exc:
            report(False, "langfuse", missing_extra(exc))
            return
        report(ok, "langfuse", detail)

    async def check_sinks(specs: Any, store: SqlStore) -> None:
        nonlocal plan_langfuse
        try:
            names = app.sink_names(sinks, settings, specs)
            # without keys the Langfuse sink cannot be built: the langfuse check says so on its own line
            keyless = "langfuse" in names and not app.langfuse_keys_set(settings)
            plan_langfuse = plan_langfuse or keyless
            built = app.build_sinks([n for n in names if not (keyless and n == "langfuse")], settings, store)
        except ConfigError as exc:
            report(False, "sinks", str(exc))
            return
        except ModuleNotFoundError as exc:
            report(False, "sinks", missing_extra(exc))
            return
        report(True, "sinks", ", ".join(names) + " configured (delivery is retried through the outbox)")
        for sink in built:
            await sink.aclose()

    async def checks() -> None:
        try:
            store = app.build_store(settings)
        except StoreError as exc:
            report(False, "store", str(exc))
            return
        try:
            await store.open()
            report(True, "store", store.engine.url.render_as_string(hide_password=True))
            for problem in await store.maintenance_problems():
                report(False, "store maintenance", problem)
        except StoreError as exc:
            report(False, "store", str(exc))
        finally:
            await store.close()
        try:
            specs = app.source_specs(sources, settings)
            for spec in specs:
                if spec.name == "otlp-file":
                    path = Path(spec.argument or "")
                    ok = path.is_file()
                    report(ok, f"source {spec}", "readable" if ok else "does not exist")
                elif spec.entry.listens:
                    try:  # bind and let go at once: a port another process holds fails here, not at `run`
                        server.bind(settings.http.host, settings.http.port).close()
                    except ConfigError as exc:
                        report(False, f"source {spec}", f"{exc} (is a sidecar already running?)")
                    else:
                        report(True, f"source {spec}", f"receiver will listen on {settings.http.address}")
        except ConfigError as exc:
            report(False, "sources", str(exc))
        else:
            await check_sinks(specs, store)
        try:
            build_metrics(settings)
        except ConfigError as exc:
            report(False, "metrics", str(exc))
        if plan_langfuse:
            await check_langfuse()
        judge = app.build_judge(settings)
        if judge is None:
            report(
                True,
                "judge",
                "not configured: judged metrics are skipped (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)",
            )
            return
        try:
            report(True, "judge", await judge.check())
        except Exception as exc:
            report(False, "judge", f"{exc} (check [judge] base_url, model and OPENAI_API_KEY)")
        finally:
            await judge.close()

    asyncio.run(checks())
    if problems:
        err().print(f"{problems} problem(s) found")
        sys.exit(1)
