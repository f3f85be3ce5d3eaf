"""`tracing-eval` command line: run the sidecar, evaluate files, read results and the review queue."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tracing_eval import logging as te_logging
from tracing_eval.config import ConfigError, Settings, load_settings
from tracing_eval.evaluate import evaluate_all
from tracing_eval.inspection import inspect_traces, render
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.report import metric_means, regressions, results_table, review_table, thread_record
from tracing_eval.store.sql import SqlStore, StoreError
from tracing_eval.transcripts import TranscriptError, thread_from_json_line

F = TypeVar("F", bound=Callable[..., Any])


def out() -> Console:
    """Standard output; made per call so COLUMNS and redirection are honoured."""
    return Console()


def err() -> Console:
    return Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err().print(f"[bold red]error:[/bold red] {escape(message)}")
    sys.exit(code)


def friendly_errors(fn: F) -> F:
    """Turn configuration and store errors into one clear line and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, StoreError, TranscriptError) as exc:
            _fail(str(exc))

    return wrapper  # type: ignore[return-value]


def config_option(fn: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        help="TOML config file (default: ./tracing-eval.toml if present).",
    )(fn)


def _settings(config_path: Path | None, **overrides: Any) -> Settings:
    settings = load_settings(config_path, **overrides)
    te_logging.configure(settings.logging.level, settings.logging.format)
    return settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracing-eval")
def main() -> None:
    """Evaluate LLM conversation threads from traces and write the scores back."""


# -- run ---------------------------------------------------------------------------------------


@main.command()
@config_option
@click.option("--once", is_flag=True, help="Run one tick over the sources, treating all input as settled, then exit.")
@click.option("--source", "sources", multiple=True, metavar="SPEC", help="otlp-http or otlp-file:PATH (repeatable).")
@click.option("--sink", "sinks", multiple=True, metavar="NAME", help="Result sinks (repeatable); local is always on.")
@click.option(
    "--http", "http", default=None, metavar="HOST:PORT", help="Address of the HTTP server (default 127.0.0.1:4318)."
)
@friendly_errors
def run(
    config_path: Path | None, once: bool, sources: tuple[str, ...], sinks: tuple[str, ...], http: str | None
) -> None:
    """Run the sidecar: receive and pull spans, evaluate ready threads, write results."""
    from tracing_eval import worker

    overrides: dict[str, Any] = {}
    if http:
        overrides["http"] = {"address": http}
    settings = _settings(config_path, **overrides)
    plan = worker.plan_sources(sources, settings)
    sink_list = worker.sink_names(sinks, settings, plan)
    if once:
        if plan.otlp_http and not plan.files and not plan.langfuse:
            raise ConfigError(
                "`run --once` pulls sources; give --source otlp-file:PATH or langfuse (the receiver needs `run`)"
            )
        asyncio.run(_run_once(settings, plan, sink_list))
        return
    asyncio.run(_run_forever(settings, plan, sink_list))


async def _run_once(settings: Settings, plan: Any, sinks: list[str], since: Any = None) -> None:
    """One tick that treats all input as settled, then the tables of scores and the review queue."""
    from tracing_eval import worker

    store = worker.build_store(settings)
    await store.open()
    pipeline = None
    try:
        pipeline = worker.build_pipeline(settings, store, plan, sinks, complete_files=True, since=since)
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
        records = await _stored_records(store)
        out().print(results_table(records, width=out().width))
        out().print(review_table(await store.review_items("open")))
    finally:
        if pipeline is not None:
            await pipeline.close()
        await store.close()


async def _run_forever(settings: Settings, plan: Any, sinks: list[str]) -> None:
    from connectors.otlp.receiver import OtlpReceiver
    from tracing_eval import worker
    from tracing_eval.telemetry import Telemetry

    store = worker.build_store(settings)
    await store.open()
    pipeline = None
    telemetry = Telemetry()  # this worker's Prometheus series, served on /metrics
    try:
        pipeline = worker.build_pipeline(settings, store, plan, sinks, complete_files=False, telemetry=telemetry)
        receiver = (
            OtlpReceiver(store, settings.receiver, telemetry=telemetry, sinks=pipeline.outbox_sinks)
            if plan.otlp_http
            else None
        )
        await worker.Worker(settings, pipeline, receiver).run()
    finally:
        if pipeline is not None:
            await pipeline.close()
        await store.close()


@main.command()
@config_option
@click.option("--since", required=True, help="How far back to read: a duration (90m, 24h, 7d, 2w) or an ISO time.")
@click.option("--sink", "sinks", multiple=True, metavar="NAME", help="Extra result sinks (langfuse is implied).")
@friendly_errors
def backfill(config_path: Path | None, since: str, sinks: tuple[str, ...]) -> None:
    """Read Langfuse history since a time, evaluate it, and write the scores back."""
    from connectors.langfuse.settings import parse_since
    from tracing_eval import worker

    settings = _settings(config_path)
    try:
        start = parse_since(since)
    except ValueError as exc:
        raise ConfigError(f"--since: {exc}") from None
    plan = worker.SourcePlan(otlp_http=False, files=(), langfuse=True)
    err().print(f"backfilling Langfuse from {start.isoformat()} (read window by window, then evaluated)")
    asyncio.run(_run_once(settings, plan, worker.sink_names(sinks, settings, plan), since=start))


async def _catch_up(sources: Any, store: SqlStore, since: Any) -> None:
    """Pull the Langfuse source window by window up to now, with a progress bar over the time range."""
    from connectors.langfuse.source import LangfuseSource, SourceState

    source = next(s for s in sources if isinstance(s, LangfuseSource))
    total = max(1.0, time.time() - since.timestamp())
    spans = 0
    with Progress(
        TextColumn("backfill"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}% of the time range, {task.fields[spans]} spans"),
        TimeElapsedColumn(),
        console=err(),
        disable=not err().is_terminal,
    ) as progress:
        task = progress.add_task("backfill", total=total, spans=0)
        while True:
            pulled_at = time.time()
            spans += await source.pull(store, pulled_at)
            watermark = SourceState.loads(await store.get_source_state(source.state_key)).watermark
            done = total if watermark is None else min(total, watermark.timestamp() - since.timestamp())
            progress.update(task, completed=done, spans=spans)
            if watermark is None or watermark.timestamp() >= pulled_at - 1:
                break
    err().print(f"read {spans} spans from Langfuse since {since.isoformat()}")


async def _stored_records(store: SqlStore) -> list[dict[str, Any]]:
    by_thread: dict[str, list[Any]] = {}
    for r in await store.results():
        by_thread.setdefault(r.thread_key, []).append(r.result)
    records = []
    for key, results in by_thread.items():
        rec = thread_record(key, results)
        rec["thread_key"] = key
        records.append(rec)
    return records


# -- eval --------------------------------------------------------------------------------------


def _read_threads(path: Path, bad: list[str]) -> Iterator[Any]:
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield thread_from_json_line(line, n)
            except TranscriptError as exc:
                bad.append(str(exc))
                err().print(f"[yellow]skipped[/yellow] {path}:{exc}")


@main.command("eval")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
@click.option(
    "--metrics", "metric_names", default=None, help="Comma-separated metric names (default: the configured set)."
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table", show_default=True)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write JSON lines here (usable as --baseline).",
)
@click.option(
    "--baseline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file written by --out to compare against.",
)
@click.option(
    "--tolerance",
    type=float,
    default=0.03,
    show_default=True,
    help="Allowed drop of a metric's dataset mean below the baseline.",
)
@friendly_errors
def eval_cmd(
    file: Path,
    config_path: Path | None,
    metric_names: str | None,
    fmt: str,
    out_path: Path | None,
    baseline: Path | None,
    tolerance: float,
) -> None:
    """Evaluate transcripts (JSON lines: {"thread_id", "turns": [messages]}) without a store."""
    settings = _settings(config_path)
    names = [n.strip() for n in metric_names.split(",") if n.strip()] if metric_names else None
    metrics = build_metrics(settings, names)
    bad: list[str] = []
    threads = list(_read_threads(file, bad))
    records = asyncio.run(_eval_threads(settings, metrics, threads))
    lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
    if out_path:
        out_path.write_bytes(lines)
    if fmt == "jsonl":
        sys.stdout.buffer.write(lines)
    elif fmt == "json":
        sys.stdout.buffer.write(
            orjson.dumps({"threads": records, "means": metric_means(records)}, option=orjson.OPT_INDENT_2) + b"\n"
        )
    else:
        out().print(results_table(records, title=f"{file.name}: {len(records)} threads", width=out().width))
        out().print("dataset means: " + ", ".join(f"{k}={v:.3f}" for k, v in metric_means(records).items()))
    sys.stdout.flush()
    if baseline is not None:
        base = [orjson.loads(x) for x in baseline.read_bytes().splitlines() if x.strip()]
        failed = regressions(metric_means(records), metric_means(base), tolerance)
        for line in failed:
            err().print(f"[bold red]regression[/bold red] {line}")
        if failed:
            sys.exit(1)
        err().print(f"no metric fell more than {tolerance} below the baseline")
    if bad:
        _fail(f"{len(bad)} line(s) of {file} could not be read (see above)", code=2)


async def _eval_threads(settings: Settings, metrics: Any, threads: list[Any]) -> list[dict[str, Any]]:
    """Evaluate threads (judge calls of several threads overlap), keeping input order."""
    from tracing_eval import worker
    from tracing_eval.judge import MemoryCache

    judge = worker.build_judge(settings, cache=MemoryCache() if settings.judge.cache else None)
    if metrics.judged and judge is None:
        err().print("judge tier skipped: no judge configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)")
    gate = asyncio.Semaphore(settings.judge.max_concurrency if judge else 1)
    with Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
        disable=not err().is_terminal,
    ) as progress:
        task = progress.add_task("eval", total=len(threads))

        async def one(thread: Any) -> dict[str, Any]:
            async with gate:
                results = await evaluate_all(thread, metrics, judge.for_thread(thread.key) if judge else None)
            progress.advance(task)
            return thread_record(thread.key, results, len(thread.turns))

        try:
            return list(await asyncio.gather(*(one(t) for t in threads)))
        finally:
            if judge is not None:
                await judge.close()


# -- doctor ------------------------------------------------------------------------------------


@main.command()
@config_option
@click.option(
    "--source", "sources", multiple=True, metavar="SPEC", help="Sources to check (default: the configured ones)."
)
@click.option("--sink", "sinks", multiple=True, metavar="NAME", help="Sinks to check (default: the configured ones).")
def doctor(config_path: Path | None, sources: tuple[str, ...], sinks: tuple[str, ...]) -> None:
    """Check the configuration, the store, the sources, the sinks and the judge; exit 1 if anything is wrong."""
    from tracing_eval import worker

    problems = 0

    def report(ok: bool, what: str, detail: str) -> None:
        nonlocal problems
        problems += not ok
        mark = "[green]ok[/green]  " if ok else "[red]FAIL[/red]"
        out().print(f"{mark} {escape(what)}: {escape(detail)}")

    plan_langfuse = "langfuse" in sources
    try:
        settings = _settings(config_path)
        plan_langfuse = plan_langfuse or settings.sources.langfuse
        report(True, "config", str(config_path or "defaults, environment and ./tracing-eval.toml if present"))
    except ConfigError as exc:
        report(False, "config", str(exc))
        sys.exit(1)

    async def check_langfuse() -> None:
        from connectors.langfuse import LangfuseClient

        try:
            client = LangfuseClient(settings.langfuse)
        except Exception as exc:
            report(False, "langfuse", f"{exc} (set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_BASE_URL)")
            return
        try:
            generation = await client.generation()
            project = await client.project_id()
            report(True, "langfuse", f"{settings.langfuse.host}: project {project}, read API {generation}")
        except Exception as exc:
            report(False, "langfuse", f"{exc} (check the keys and LANGFUSE_BASE_URL)")
        finally:
            await client.aclose()

    async def check_sinks(plan: Any, store: SqlStore) -> None:
        try:
            names = worker.sink_names(sinks, settings, plan)
            built = worker.build_sinks(names, settings, store)
        except ConfigError as exc:
            report(False, "sinks", str(exc))
            return
        report(True, "sinks", ", ".join(names) + " configured (delivery is retried through the outbox)")
        for sink in built:
            closer = getattr(sink, "aclose", None) or getattr(sink, "close", None)
            if closer is not None:
                result = closer()
                if hasattr(result, "__await__"):
                    await result

    async def checks() -> None:
        try:
            store = worker.build_store(settings)
        except StoreError as exc:
            report(False, "store", str(exc))
            return
        try:
            await store.open()
            report(True, "store", store.engine.url.render_as_string(hide_password=True))
        except StoreError as exc:
            report(False, "store", str(exc))
        finally:
            await store.close()
        try:
            plan = worker.plan_sources(sources, settings)
            for path in plan.files:
                ok = path.is_file()
                report(ok, f"source otlp-file:{path}", "readable" if ok else "does not exist")
            if plan.otlp_http:
                report(True, "source otlp-http", f"receiver will listen on {settings.http.address}")
        except ConfigError as exc:
            report(False, "sources", str(exc))
        else:
            await check_sinks(plan, store)
        try:
            build_metrics(settings)
        except ConfigError as exc:
            report(False, "metrics", str(exc))
        if plan_langfuse:
            await check_langfuse()
        judge = worker.build_judge(settings)
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


# -- results and review ------------------------------------------------------------------------


def _with_store(settings: Settings, fn: Callable[[SqlStore], Any]) -> Any:
    async def go() -> Any:
        store = SqlStore(settings.store.url)
        await store.open()
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(go())


@main.command()
@config_option
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@click.option("--thread", "thread_key", default=None, help="Only this thread key.")
@friendly_errors
def results(config_path: Path | None, fmt: str, thread_key: str | None) -> None:
    """Print stored results, in the same schema as `eval`, with the thread key."""
    settings = _settings(config_path)
    records = _with_store(settings, _stored_records)
    if thread_key:
        records = [r for r in records if r["thread_key"] == thread_key]
    if fmt == "jsonl":
        sys.stdout.buffer.write(b"".join(orjson.dumps(r) + b"\n" for r in records))
    else:
        out().print(results_table(records, width=out().width))


@main.command("inspect")
@click.argument("trace_id", required=False)
@click.option("--thread", "thread_key", default=None, help="Every trace of this thread key instead of one trace.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@config_option
@friendly_errors
def inspect_cmd(trace_id: str | None, thread_key: str | None, fmt: str, config_path: Path | None) -> None:
    """Show how one stored trace (or thread) was read: each span's role and convention, the
    messages and tool calls read from it, and the turn that came out."""
    if bool(trace_id) == bool(thread_key):
        _fail("give a TRACE_ID or --thread KEY (one of them)")
    settings = _settings(config_path)

    async def load(store: SqlStore) -> tuple[str | None, list[Any]]:
        key = thread_key or await store.thread_of_trace(trace_id.strip().lower())
        return key, (await store.load_traces(key) if key else [])

    key, traces = _with_store(settings, load)
    if not traces:
        _fail(f"no stored spans for trace {trace_id}" if trace_id else f"no stored spans for thread {thread_key!r}")
    report = inspect_traces(key, traces, trace_id.strip().lower() if trace_id else None)
    if fmt == "json":
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2, default=str) + b"\n")
    else:
        out().print(render(report))


@main.group()
def review() -> None:
    """The local review queue: threads that failed the review rule."""


@review.command("list")
@config_option
@click.option("--all", "show_all", is_flag=True, help="Include resolved and superseded items.")
@friendly_errors
def review_list(config_path: Path | None, show_all: bool) -> None:
    """List open review items."""
    settings = _settings(config_path)
    items = _with_store(settings, lambda s: s.review_items(None if show_all else "open"))
    out().print(review_table(items))


@review.command("show")
@click.argument("item_id", type=int)
@config_option
@friendly_errors
def review_show(item_id: int, config_path: Path | None) -> None:
    """Show one review item with the thread's stored results."""
    settings = _settings(config_path)

    async def show(store: SqlStore) -> tuple[Any, list[Any]]:
        item = await store.review_item(item_id)
        return item, (await store.results(item.thread_key) if item else [])

    item, stored = _with_store(settings, show)
    if item is None:
        _fail(f"no review item {item_id}")
    out().print(
        f"[bold]review item {item.id}[/bold]  thread {item.thread_key}  version {item.thread_version}  {item.status}"
    )
    for r in item.reasons:
        out().print(f"  - {r['metric']} on {r['target']}: score {r['score']} label {r['label']}: {r['reason']}")
    out().print(
        results_table([{**thread_record(item.thread_key, [s.result for s in stored]), "thread_key": item.thread_key}])
    )


@review.command("resolve")
@click.argument("item_id", type=int)
@click.option("--note", default="resolved", help="What was decided.")
@config_option
@friendly_errors
def review_resolve(item_id: int, note: str, config_path: Path | None) -> None:
    """Mark an open review item resolved."""
    settings = _settings(config_path)
    ok = _with_store(settings, lambda s: s.resolve_review(item_id, note, time.time()))
    if not ok:
        _fail(f"review item {item_id} does not exist or is not open")
    out().print(f"review item {item_id} resolved")
