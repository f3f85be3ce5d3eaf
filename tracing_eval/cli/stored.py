"""Commands that read the store: `results`, `inspect` and the review queue (`review list|show|resolve`)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson
from rich.markup import escape

from tracing_eval.cli.common import config_option, fail, friendly_errors, out, settings_for, stored_records
from tracing_eval.config import Settings
from tracing_eval.inspection import inspect_traces, render
from tracing_eval.report import conversation_lines, results_table, review_record, review_table, thread_record
from tracing_eval.store.sql import SqlStore


def _with_store(settings: Settings, fn: Callable[[SqlStore], Any]) -> Any:
    async def go() -> Any:
        store = SqlStore(settings.store.url)
        await store.open()
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(go())


@click.command()
@config_option
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@click.option("--thread", "thread_key", default=None, help="Only this thread key.")
@friendly_errors
def results(config_path: Path | None, fmt: str, thread_key: str | None) -> None:
    """Print stored results, in the same schema as `eval`, with the thread key."""
    settings = settings_for(config_path)
    records = _with_store(settings, stored_records)
    if thread_key:
        records = [r for r in records if r["thread_key"] == thread_key]
    if fmt == "jsonl":
        sys.stdout.buffer.write(b"".join(orjson.dumps(r) + b"\n" for r in records))
    else:
        out().print(results_table(records, width=out().width))


@click.command("inspect")
@click.argument("trace_id", required=False)
@click.option("--thread", "thread_key", default=None, help="Every trace of this thread key instead of one trace.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@config_option
@friendly_errors
def inspect_cmd(trace_id: str | None, thread_key: str | None, fmt: str, config_path: Path | None) -> None:
    """Show how one stored trace (or thread) was read: each span's role and convention, the
    messages and tool calls read from it, and the turn that came out."""
    if bool(trace_id) == bool(thread_key):
        fail("give a TRACE_ID or --thread KEY (one of them)")
    settings = settings_for(config_path)

    async def load(store: SqlStore) -> tuple[str | None, list[Any]]:
        key = thread_key or await store.thread_of_trace((trace_id or "").strip().lower())
        return key, (await store.load_traces(key) if key else [])

    key, traces = _with_store(settings, load)
    if not traces:
        fail(f"no stored spans for trace {trace_id}" if trace_id else f"no stored spans for thread {thread_key!r}")
    report = inspect_traces(key, traces, trace_id.strip().lower() if trace_id else None)
    if fmt == "json":
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2, default=str) + b"\n")
    else:
        out().print(render(report))


@click.group()
def review() -> None:
    """The local review queue: threads that failed the review rule."""


@review.command("list")
@config_option
@click.option("--all", "show_all", is_flag=True, help="Include resolved and superseded items.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@friendly_errors
def review_list(config_path: Path | None, show_all: bool, fmt: str) -> None:
    """List open review items (jsonl: one item per line, with every reason)."""
    settings = settings_for(config_path)
    items = _with_store(settings, lambda s: s.review_items(None if show_all else "open"))
    if fmt == "jsonl":
        sys.stdout.buffer.write(b"".join(orjson.dumps(review_record(it)) + b"\n" for it in items))
    else:
        out().print(review_table(items))


@review.command("show")
@click.argument("item_id", type=int)
@config_option
@friendly_errors
def review_show(item_id: int, config_path: Path | None) -> None:
    """Show one review item with the thread's stored results."""
    settings = settings_for(config_path)

    async def show(store: SqlStore) -> tuple[Any, list[Any], list[Any]]:
        item = await store.review_item(item_id)
        if item is None:
            return None, [], []
        return item, await store.results(item.thread_key), await store.load_traces(item.thread_key)

    item, stored, traces = _with_store(settings, show)
    if item is None:
        fail(f"no review item {item_id}")
    console = out()
    console.print(
        f"[bold]review item {item.id}[/bold]  thread {escape(item.thread_key)}  version {item.thread_version}  "
        f"{item.status}"
    )
    for r in item.reasons:
        line = f"  - {r['metric']} on {r['target']}: score {r['score']} label {r['label']}: {r['reason']}"
        console.print(escape(line))
    console.print(
        results_table(
            [{**thread_record(item.thread_key, [s.result for s in stored]), "thread_key": item.thread_key}],
            width=console.width,
        )
    )
    console.print("[bold]conversation[/bold]" + ("" if traces else " (its spans are no longer stored)"))
    if traces:
        from tracing_eval.assemble import thread_from_traces

        thread = thread_from_traces(item.thread_key, traces, source=item.thread_key.partition(":")[0])
        for line in conversation_lines(thread):
            console.print(escape(line))


@review.command("resolve")
@click.argument("item_id", type=int)
@click.option("--note", default="resolved", help="What was decided.")
@config_option
@friendly_errors
def review_resolve(item_id: int, note: str, config_path: Path | None) -> None:
    """Mark an open review item resolved."""
    settings = settings_for(config_path)
    ok = _with_store(settings, lambda s: s.resolve_review(item_id, note, time.time()))
    if not ok:
        fail(f"review item {item_id} does not exist or is not open")
    out().print(f"review item {item_id} resolved")
