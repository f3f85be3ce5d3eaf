"""`tracing-eval` command line: run the sidecar, evaluate files, read results and the review queue."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast

import click
import orjson
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tracing_eval import logging as te_logging
from tracing_eval.config import ConfigError, Settings, load_settings
from tracing_eval.extras import missing_extra_message
from tracing_eval.inspection import inspect_traces, render
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.report import (
    conversation_lines,
    error_lines,
    metric_means,
    metrics_table,
    results_table,
    review_record,
    review_table,
    thread_record,
)
from tracing_eval.store.sql import SqlStore, StoreError
from tracing_eval.transcripts import TranscriptError, thread_from_json_line

F = TypeVar("F", bound=Callable[..., Any])

#: For --help (the worker, which builds them, is imported only when a command runs; a test keeps these in step)
SOURCE_SPECS = "otlp-http, otlp-file:PATH or langfuse"
SINK_NAMES = "langfuse, otlp or webhook"


def out() -> Console:
    """Standard output; made per call so COLUMNS and redirection are honoured."""
    return Console()


def err() -> Console:
    return Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err().print(f"[bold red]error:[/bold red] {escape(message)}")
    sys.exit(code)


def _missing_extra(exc: ModuleNotFoundError) -> str:
    """The line naming the extra that installs the missing module; any other missing module is a bug."""
    message = missing_extra_message(exc)
    if message is None:
        raise exc
    return message


def friendly_errors(fn: F) -> F:
    """Turn configuration and store errors, and a missing optional part, into one clear line and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, StoreError, TranscriptError) as exc:
            _fail(str(exc))
        except ModuleNotFoundError as exc:
            _fail(_missing_extra(exc))

    return cast(F, wrapper)


def config_option(fn: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        help="TOML config file (default: ./tracing-eval.toml if present).",
    )(fn)


def _counting(label: str, total: int) -> tuple[Progress, Callable[[], None]]:
    """A transient progress bar of `total` items on a terminal, and the callback that advances it."""
    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
        disable=not err().is_terminal,
    )
    task = progress.add_task(label, total=total)
    return progress, lambda: progress.advance(task)


def _settings(config_path: Path | None, *, quiet: bool = False, **overrides: Any) -> Settings:
    """Settings, with logging configured; `quiet` commands log warnings and up unless a level is set."""
    settings = load_settings(config_path, **overrides)
    level = settings.logging.level
    if quiet and "level" not in settings.logging.model_fields_set:
        level = "warning"
    te_logging.configure(level, settings.logging.format)
    return settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracing-eval")
def main() -> None:
    """Evaluate LLM conversation threads from traces and write the scores back."""


# -- run ---------------------------------------------------------------------------------------


@main.command()
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
    from tracing_eval import worker

    overrides: dict[str, Any] = {}
    if http:
        overrides["http"] = {"address": http}
    settings = _settings(config_path, **overrides)
    plan = worker.plan_sources(sources, settings)
    sink_list = worker.sink_names(sinks, settings, plan)
    if once:
        missing = [str(p) for p in plan.files if not p.is_file()]
        if missing:  # `run` waits for a file to appear; a one-off run has nothing to wait for
            raise ConfigError(f"source otlp-file: no such file: {', '.join(missing)}")
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
    from tracing_eval import worker
    from tracing_eval.connectors.otlp.receiver import OtlpReceiver
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
        worker.tune_gc()  # the process is the sidecar's from here on
        await worker.Worker(settings, pipeline, receiver).run()
    finally:
        if pipeline is not None:
            await pipeline.close()
        await store.close()


@main.command()
@config_option
@click.option("--since", required=True, help="How far back to read: a duration (90m, 24h, 7d, 2w) or an ISO time.")
@click.option(
    "--sink", "sinks", multiple=True, metavar="NAME", help=f"Extra result sinks, {SINK_NAMES} (langfuse is implied)."
)
@friendly_errors
def backfill(config_path: Path | None, since: str, sinks: tuple[str, ...]) -> None:
    """Read Langfuse history since a time, evaluate it, and write the scores back."""
    from tracing_eval import worker
    from tracing_eval.connectors.langfuse.settings import parse_since

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
    from tracing_eval.connectors.langfuse.source import LangfuseSource, SourceState

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
    "--runs",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Evaluate the file this many times (judge answers are not reused across runs); means, std devs and "
    "pass/fail are over all runs.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the results here: a .json name gets the baseline summary (per-metric means, std devs, "
    "coverage, per-thread pass/fail by run), any other name JSON lines. Both work as --baseline. Standard "
    "output then shows the metrics table only, unless --format is given.",
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
@click.option(
    "--coverage-tolerance",
    type=float,
    default=0.05,
    show_default=True,
    help="Allowed drop of a metric's coverage (scored / applicable results) below the baseline.",
)
@friendly_errors
def eval_cmd(
    file: Path,
    config_path: Path | None,
    metric_names: str | None,
    fmt: str,
    runs: int,
    out_path: Path | None,
    baseline: Path | None,
    tolerance: float,
    coverage_tolerance: float,
) -> None:
    """Evaluate transcripts (JSON lines: {"thread_id", "turns": [messages]}) without a store.

    Exit codes: 0 done (and the gate passed), 1 the gate failed, 2 bad input, options or baseline,
    3 the judge cannot be used (unreachable, refused, or not configured for a judged metric).
    """
    from tracing_eval import gate
    from tracing_eval.offline import NO_JUDGE, JudgeUnavailable

    settings = _settings(config_path, quiet=True)
    names = [n.strip() for n in metric_names.split(",") if n.strip()] if metric_names else None
    metrics = build_metrics(settings, names)
    try:
        base = gate.load_baseline(baseline.read_bytes(), str(baseline)) if baseline else None
    except gate.BaselineError as exc:
        _fail(str(exc))
    bad: list[str] = []
    threads = list(_read_threads(file, bad))
    if base is not None and not base.thread_ids & {t.key for t in threads}:
        _fail(gate.unrelated(base, str(file)))
    try:
        done = asyncio.run(_evaluate(settings, metrics, threads, runs, explicit=names is not None))
    except JudgeUnavailable as exc:
        _fail(str(exc), code=3)
    if done.judge_skipped:
        err().print(NO_JUDGE)
    records = [{**r, "run": i} if runs > 1 else r for i, run in enumerate(done.runs, 1) for r in run]
    current = gate.RunSet([gate.run_of(run) for run in done.runs], str(file))
    format_given = click.get_current_context().get_parameter_source("fmt") is not ParameterSource.DEFAULT
    # with --out the results go to the file: the terminal gets the metrics summary, not every thread again
    _write_eval_output(fmt if format_given or out_path is None else "summary", file, records, current)
    if out_path and done.judge_problem is None:
        _write_eval_out(out_path, records, current, file)
        err().print(f"wrote {len(records)} thread result(s) to {escape(str(out_path))}")
    causes = gate.errors_by_cause(records)
    if causes:
        for line in error_lines(causes, gate.result_count(records)):
            err().print(escape(line))
    if done.usage is not None:
        u = done.usage
        err().print(
            f"judge: {u.calls} calls, {u.cache_hits} cached, {done.retries} retries, "
            f"{u.input_tokens + u.output_tokens} tokens"
        )
    if done.judge_problem is not None:
        not_written = f" ({out_path} not written)" if out_path else ""
        _fail(f"judge unusable: {done.judge_problem}{not_written}", code=3)
    report = gate.compare(current, base, tolerance, coverage_tolerance) if base is not None else None
    if report is not None:
        for line in report.notes:
            err().print(f"note: {escape(line)}")
        for line in report.flips:
            err().print(f"[yellow]flipped[/yellow] {escape(line)}")
        for line in report.failures:
            err().print(f"[bold red]regression[/bold red] {escape(line)}")
    if bad:
        _fail(f"{len(bad)} line(s) of {file} could not be read (see above)", code=2)
    if report is not None and not report.passed:
        sys.exit(1)
    if report is not None:
        err().print(
            f"gate passed on {report.compared} threads: no metric fell more than {tolerance} below the baseline, "
            "none lost coverage or gained errors"
        )


def _write_eval_output(fmt: str, file: Path, records: list[dict[str, Any]], current: Any) -> None:
    """What `eval` prints on standard output, in the chosen format."""
    if fmt == "jsonl":
        sys.stdout.buffer.write(b"".join(orjson.dumps(r) + b"\n" for r in records))
    elif fmt == "json":
        summary = {m: current.stats(m).to_json() for m in current.metrics}
        body = {"threads": records, "means": metric_means(records), "metrics": summary}
        sys.stdout.buffer.write(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
    else:  # table, or summary (the metrics table alone)
        first = [r for r in records if r.get("run", 1) == 1]
        runs = len(current.runs)
        if fmt == "table":
            title = f"{file.name}: {len(first)} threads" + (f" (run 1 of {runs})" if runs > 1 else "")
            out().print(results_table(first, title=title, width=out().width))
        out().print(metrics_table(current, title="Metrics" + (f" over {runs} runs" if runs > 1 else "")))
    sys.stdout.flush()


def _write_eval_out(path: Path, records: list[dict[str, Any]], current: Any, file: Path) -> None:
    """`--out`: the baseline summary for a .json name, else the JSON lines."""
    from tracing_eval.gate import baseline_document

    if path.suffix == ".json":
        path.write_bytes(orjson.dumps(baseline_document(current, file.name), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


async def _evaluate(settings: Settings, metrics: Any, threads: list[Any], runs: int, *, explicit: bool) -> Any:
    """`offline.evaluate_runs` with a progress bar on a terminal."""
    from tracing_eval.offline import evaluate_runs

    progress, advance = _counting("evaluating", len(threads) * runs)
    with progress:
        return await evaluate_runs(settings, metrics, threads, runs, explicit=explicit, on_done=advance)


# -- scenarios and simulate --------------------------------------------------------------------


def _time_option(value: str | None, name: str) -> float | None:
    from tracing_eval.connectors.langfuse.settings import parse_since

    if value is None:
        return None
    try:
        return parse_since(value).timestamp()
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


@main.group()
def scenarios() -> None:
    """Scenarios from failed threads, for `simulate` (and DeepEval, RAGAS)."""


@scenarios.command("export")
@config_option
@click.option(
    "--from",
    "origin",
    type=click.Choice(["store", "review", "langfuse"]),
    default="store",
    show_default=True,
    help="Failed threads in the store, the local review queue, or the Langfuse review annotation queue.",
)
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only failures of this metric (repeatable).")
@click.option("--label", "labels", multiple=True, help="Only results with this label, passing or not (repeatable).")
@click.option("--since", default=None, help="Only threads active (review items created) since: 24h, 7d or an ISO time.")
@click.option("--until", default=None, help="... and before this time.")
@click.option(
    "--review-status",
    type=click.Choice(["open", "resolved", "superseded", "all"]),
    default="open",
    show_default=True,
    help="Review items to export (--from review or langfuse; Langfuse: open = PENDING, resolved = COMPLETED).",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many scenarios (newest first).")
@click.option(
    "--max-turns", type=click.IntRange(1, 100), default=None, help="Turn limit (default: the user's turns + 2)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["scenarios", "eval", "deepeval", "ragas"]),
    default="scenarios",
    show_default=True,
    help="scenarios (for simulate), eval (thread JSONL), deepeval (ConversationalGolden JSON), ragas (multi-turn JSONL).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Add to this file (scenarios already in it are skipped); default: standard output.",
)
@friendly_errors
def scenarios_export(
    config_path: Path | None,
    origin: str,
    metrics: tuple[str, ...],
    labels: tuple[str, ...],
    since: str | None,
    until: str | None,
    review_status: str,
    limit: int | None,
    max_turns: int | None,
    fmt: str,
    out_path: Path | None,
) -> None:
    """Turn failed threads into scenarios: goal, persona, failure, turn limit, original transcript."""
    from tracing_eval.failed_threads import Selection
    from tracing_eval.scenario_formats import merge_into, render
    from tracing_eval.scenarios import ScenarioError

    settings = _settings(config_path, quiet=True)
    selection = Selection(
        metrics=frozenset(metrics),
        labels=frozenset(labels),
        since=_time_option(since, "--since"),
        until=_time_option(until, "--until"),
        review_status=None if review_status == "all" else review_status,
        limit=limit,
    )
    found = asyncio.run(_export(settings, origin, selection, max_turns))
    try:
        if out_path is None:
            sys.stdout.buffer.write(render(found, fmt)[0])
            err().print(f"{len(found)} scenario(s) from {origin}")
        else:
            added, present = merge_into(out_path, found, fmt)
            err().print(f"{added} new scenario(s) written to {out_path}, {present} already there ({origin})")
    except ScenarioError as exc:
        _fail(str(exc))


async def _export(settings: Settings, origin: str, selection: Any, max_turns: int | None) -> list[Any]:
    """Failed threads from the chosen origin, then their scenarios (goals from the judge when configured)."""
    from tracing_eval import failed_threads
    from tracing_eval.judge import JudgeClient
    from tracing_eval.scenarios import scenarios_from

    if origin == "langfuse":
        from tracing_eval.connectors.langfuse.client import LangfuseError
        from tracing_eval.connectors.langfuse.review_sessions import ReviewQueueError, ReviewSessions

        try:
            reader = ReviewSessions(settings.langfuse)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            failed = await reader.failed_threads(selection)
        except (LangfuseError, ReviewQueueError) as exc:
            raise ConfigError(f"Langfuse: {exc}") from None
        finally:
            await reader.aclose()
    else:
        store = SqlStore(settings.store.url)
        await store.open()
        try:
            read = failed_threads.from_review if origin == "review" else failed_threads.from_store
            failed = await read(store, selection)
        finally:
            await store.close()
    judge = JudgeClient.from_settings(settings.judge)
    try:
        return await scenarios_from(failed, judge, max_turns)
    finally:
        if judge is not None:
            await judge.close()


@main.command()
@click.argument("scenarios_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
@click.option(
    "--target",
    required=True,
    metavar="URL|MODULE:FUNCTION",
    help="The bot: an OpenAI-compatible base URL (with --model), or a Python callable taking the messages.",
)
@click.option("--model", default=None, help="Model to ask at a URL target.")
@click.option(
    "--system-prompt",
    default=None,
    help="The bot's system prompt, or @FILE (default: each scenario's system prompt from production).",
)
@click.option("--api-key-env", default=None, metavar="VAR", help="Environment variable with the URL target's API key.")
@click.option(
    "--user",
    "user_kind",
    type=click.Choice(["judge", "replay"]),
    default="judge",
    show_default=True,
    help="judge: the judge model plays the user; replay: the original user's messages, in order (no model).",
)
@click.option("--max-turns", type=click.IntRange(1, 100), default=None, help="Override every scenario's turn limit.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=None,
    help="Conversations at once (default: judge.max_concurrency).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the transcripts (eval input) here; default: standard output.",
)
@friendly_errors
def simulate(
    scenarios_file: Path,
    config_path: Path | None,
    target: str,
    model: str | None,
    system_prompt: str | None,
    api_key_env: str | None,
    user_kind: str,
    max_turns: int | None,
    concurrency: int | None,
    out_path: Path | None,
) -> None:
    """Play each scenario's user against the bot and write the conversations as `eval` input.

    Exit codes: 0 every scenario simulated, 1 some could not be (the others are written), 2 bad input
    or options, 3 the judge cannot be used.
    """
    import os

    from tracing_eval.offline import JudgeUnavailable
    from tracing_eval.scenarios import ScenarioError, read_scenarios
    from tracing_eval.simulate import SimulationError, run_simulation, target_from

    settings = _settings(config_path, quiet=True)
    try:
        loaded = read_scenarios(scenarios_file.read_bytes(), str(scenarios_file))
        if system_prompt is not None and system_prompt.startswith("@"):
            system_prompt = Path(system_prompt[1:]).read_text(encoding="utf-8")
        api_key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not api_key:
            raise SimulationError(f"--api-key-env {api_key_env}: the variable is not set")
        bot = target_from(target, model=model, api_key=api_key)
    except (ScenarioError, SimulationError, OSError) as exc:
        _fail(str(exc))
    progress, advance = _counting("simulating", len(loaded))
    try:
        with progress:
            done, user_name = asyncio.run(
                run_simulation(
                    settings,
                    loaded,
                    bot,
                    user_kind,
                    system_prompt=system_prompt,
                    max_turns=max_turns,
                    concurrency=concurrency,
                    on_done=advance,
                )
            )
    except JudgeUnavailable as exc:
        _fail(str(exc), code=3)
    lines = b"".join(orjson.dumps(d.eval_line(user_name, bot.name)) + b"\n" for d in done if d.error is None)
    if out_path is None:
        sys.stdout.buffer.write(lines)
    else:
        out_path.write_bytes(lines)
    failed = [d for d in done if d.error is not None]
    stops = ", ".join(f"{k} {v}" for k, v in sorted(Counter(d.stop_reason for d in done if d.error is None).items()))
    err().print(
        f"simulated {len(done) - len(failed)} of {len(done)} scenario(s) with user {user_name}: {stops or 'none'}"
    )
    for d in failed:
        err().print(f"[red]not simulated[/red] {escape(d.scenario.id)}: {escape(str(d.error))}")
    if failed:
        sys.exit(1)


# -- calibrate ---------------------------------------------------------------------------------


@main.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@config_option
@click.option(
    "--label",
    "label_path",
    required=True,
    metavar="PATH|NAME",
    help="The human label: thread_labels.KEY or turn_labels.KEY in FILE (nested keys with dots), or the name of "
    "the reviewers' score with --source langfuse.",
)
@click.option(
    "--metric",
    "metric_name",
    default=None,
    help="Metric to measure (default: every deterministic metric that scores at the level).",
)
@click.option(
    "--level",
    type=click.Choice(["thread", "turn", "reply"]),
    default=None,
    help="Unit compared: thread (thread_labels), turn (the turn holding a labelled message) or reply (a labelled "
    "assistant message against the replies the metric's evidence lists). Default: thread for thread_labels, "
    "reply for turn_labels when the metric lists replies, else turn.",
)
@click.option(
    "--positive",
    default=None,
    metavar="VALUES|COMPARISON",
    help="Label values that mean trouble (full_refusal,partial_refusal) or a comparison (<=2, ==0). "
    "Without it only the ordinal statistics (Spearman) are computed.",
)
@click.option(
    "--aggregate",
    type=click.Choice(["mean", "majority", "all", "any"]),
    default="mean",
    show_default=True,
    help="How a list of annotators' values meets --positive.",
)
@click.option(
    "--flag",
    "flag_labels",
    default=None,
    metavar="LABELS",
    help="Metric labels that count as flagged (default: a result that did not pass, which is what routes to review).",
)
@click.option("--threshold", type=float, default=None, help="A score below this counts as flagged.")
@click.option(
    "--flag-evidence",
    "flag_evidence",
    default=None,
    metavar="FIELD",
    help="Flagged when this evidence field is set (true, non-zero, a non-empty list): abandoned, masked_error, ...",
)
@click.option(
    "--value",
    default="score",
    show_default=True,
    metavar="score|evidence.FIELD",
    help="What orders units for Spearman and ROC AUC: 1 - score, or an evidence number / list length.",
)
@click.option("--evidence", "evidence_field", default=None, help="Evidence list of reply positions (--level reply).")
@click.option(
    "--not-applicable",
    "not_applicable",
    type=click.Choice(["negative", "skip"]),
    default="negative",
    show_default=True,
    help="A not_applicable result counts as not flagged, or is left out.",
)
@click.option(
    "--bootstrap",
    "samples",
    type=click.IntRange(0, 100_000),
    default=1000,
    show_default=True,
    help="Resamples of the 95% intervals (0: no intervals).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option(
    "--source",
    type=click.Choice(["file", "langfuse"]),
    default="file",
    show_default=True,
    help="file: labels in FILE; langfuse: reviewers' scores (source ANNOTATION) against this project's scores.",
)
@click.option("--since", default="7d", show_default=True, help="With --source langfuse: how far back to read.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@friendly_errors
def calibrate(
    file: Path | None,
    config_path: Path | None,
    label_path: str,
    metric_name: str | None,
    level: str | None,
    positive: str | None,
    aggregate: str,
    flag_labels: str | None,
    threshold: float | None,
    flag_evidence: str | None,
    value: str,
    evidence_field: str | None,
    not_applicable: str,
    samples: int,
    seed: int,
    source: str,
    since: str,
    fmt: str,
) -> None:
    """Measure how a metric agrees with human labels: Cohen's kappa, precision, recall, F1 and the
    confusion table, Spearman and ROC AUC, with bootstrap intervals.

    Exit codes: 0 measured, 2 bad input or options (no such label, no overlap), 3 the judge cannot be used.
    """
    from tracing_eval import calibrate as cal
    from tracing_eval.agreement import agreement
    from tracing_eval.agreement_report import (
        comparison_json,
        confusion_table,
        stats_table,
        summary_table,
    )
    from tracing_eval.offline import JudgeUnavailable

    settings = _settings(config_path, quiet=True)
    try:
        if sum(x is not None for x in (flag_labels, threshold, flag_evidence)) > 1:
            raise cal.CalibrationError("give one of --flag, --threshold and --flag-evidence, not several")
        rule = cal.LabelRule(cal.Condition.parse(positive) if positive else None, aggregate)
        prediction = cal.Prediction(
            labels=frozenset(x.strip() for x in flag_labels.split(",") if x.strip()) if flag_labels else None,
            threshold=threshold,
            evidence=flag_evidence,
            value=value,
            not_applicable=not_applicable,
        )
        if source == "langfuse":
            if file is not None:
                raise cal.CalibrationError("--source langfuse reads Langfuse; give no FILE")
            if not metric_name:
                raise cal.CalibrationError("--source langfuse needs --metric (the score this project writes)")
            build_metrics(settings, [metric_name])
            units = asyncio.run(_langfuse_units(settings, label_path, metric_name, since, rule, prediction))
            if not units.pairs:
                _fail(_nothing_to_compare(units.left_out, positive))
            found = agreement(units.pairs, samples=samples, seed=seed)
            comparisons = [cal.Comparison(metric_name, found, units.left_out, units.not_applicable, "trace or session")]
            where = f"Langfuse scores {label_path!r} (ANNOTATION, since {since})"
        else:
            if file is None:
                raise cal.CalibrationError("give the labelled FILE (JSON lines), or --source langfuse")
            if not file.is_file():
                raise cal.CalibrationError(f"{file} does not exist")
            path = cal.LabelPath.parse(label_path)
            names = [metric_name] if metric_name else _calibrated_metrics(level)
            metrics = build_metrics(settings, names)
            rows, threads = _labelled_rows(file)
            done = asyncio.run(_evaluate(settings, metrics, threads, 1, explicit=True))
            if done.judge_problem is not None:
                _fail(f"judge unusable: {done.judge_problem}", code=3)
            comparisons = cal.measure(
                rows,
                threads,
                done.runs[0],
                metrics=names,
                path=path,
                rule=rule,
                prediction=prediction,
                level=level,
                evidence_field=evidence_field,
                samples=samples,
                seed=seed,
            )
            where = f"{file} {path}"
    except cal.CalibrationError as exc:
        _fail(str(exc))
    except JudgeUnavailable as exc:
        _fail(str(exc), code=3)
    if not any(c.agreement.n for c in comparisons):
        left: dict[str, int] = {}
        for c in comparisons:
            for k, v in c.left_out.items():
                left[k] = left.get(k, 0) + v
        _fail(_nothing_to_compare(left, positive))
    header = {
        "source": where,
        "label": label_path,
        "positive": str(rule.positive) if rule.positive else None,
        "aggregate": aggregate,
        "flagged_when": prediction.describe(),
        "value": value,
        "not_applicable": not_applicable,
        "bootstrap": {"samples": samples, "seed": seed, "interval": 0.95},
    }
    if fmt == "json":
        doc = {**header, "results": [comparison_json(c) for c in comparisons]}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        return
    positive_text = f"{rule.positive} (lists: {aggregate})" if rule.positive else "none (ordinal statistics only)"
    out().print(f"human label: {escape(where)}; positive: {escape(positive_text)}")
    out().print(f"metric flagged when: {escape(prediction.describe())}; order by: {escape(value)}")
    if len(comparisons) == 1:
        out().print(stats_table(comparisons[0]))
        out().print(confusion_table(comparisons[0]))
    else:
        out().print(summary_table(comparisons))
    for c in comparisons:
        left_out = ", ".join(f"{n} {k}" for k, n in c.left_out.items())
        treated = "left out" if not_applicable == "skip" else "counted as not flagged"
        err().print(
            escape(
                f"{c.metric}: {c.not_applicable} not_applicable ({treated})"
                + (f"; left out: {left_out}" if left_out else "")
            )
        )
    if samples:
        err().print(f"intervals: 95% percentile bootstrap, {samples} resamples, seed {seed}")


def _nothing_to_compare(left_out: dict[str, int], positive: str | None) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in left_out.items())
    hint = "" if positive else "; give --positive for a label that is not a number"
    return f"no unit has both a label and a result ({reasons or 'nothing matched'}){hint}"


def _calibrated_metrics(level: str | None) -> list[str]:
    """Every deterministic metric that has a verdict at the level (thread_stats has none)."""
    from tracing_eval.calibrate import REPLY_EVIDENCE
    from tracing_eval.metrics.deterministic import DETERMINISTIC_METRICS

    if level == "reply":
        return list(REPLY_EVIDENCE)
    return [n for n in DETERMINISTIC_METRICS if n != "thread_stats"]


def _labelled_rows(file: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every line of a labelled JSONL as raw object and thread; a bad line is an error naming it."""
    rows, threads = [], []
    with file.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                threads.append(thread_from_json_line(line, n))
            except TranscriptError as exc:
                raise TranscriptError(f"{file}:{exc}") from None
            rows.append(orjson.loads(line))
    if not rows:
        raise TranscriptError(f"{file}: no threads in the file")
    return rows, threads


async def _langfuse_units(
    settings: Settings, human_name: str, metric: str, since: str, rule: Any, prediction: Any
) -> Any:
    from tracing_eval.calibrate import CalibrationError, join_scored
    from tracing_eval.connectors.langfuse.annotations import human_and_ours
    from tracing_eval.connectors.langfuse.client import LangfuseClient, LangfuseError
    from tracing_eval.connectors.langfuse.settings import parse_since

    try:
        start = parse_since(since)
    except ValueError as exc:
        raise ConfigError(f"--since: {exc}") from None
    try:
        client = LangfuseClient(settings.langfuse)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        subjects = await human_and_ours(client, human_name, metric, start)
    except LangfuseError as exc:
        raise ConfigError(f"Langfuse: {exc}") from None
    finally:
        await client.aclose()
    if not subjects:
        raise CalibrationError(
            f"Langfuse has no reviewer scores (source ANNOTATION) named {human_name!r} since {start.isoformat()}"
        )
    scored = [s for s in subjects if s.ours is not None]
    if not scored:
        raise CalibrationError(
            f"none of the {len(subjects)} trace(s)/session(s) reviewers scored as {human_name!r} has a "
            f"{metric!r} score from this project (evaluate them first, e.g. with `tracing-eval backfill`)"
        )
    return join_scored(((s.human, s.ours) for s in subjects), rule=rule, prediction=prediction)


# -- doctor ------------------------------------------------------------------------------------


@main.command()
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
        try:
            from tracing_eval.connectors.langfuse import LangfuseClient
        except ModuleNotFoundError as exc:
            report(False, "langfuse", _missing_extra(exc))
            return
        try:
            client = LangfuseClient(settings.langfuse)
        except ConfigError as exc:  # the message names the variables to set
            report(False, "langfuse", str(exc))
            return
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
        nonlocal plan_langfuse
        try:
            names = worker.sink_names(sinks, settings, plan)
            # without keys the Langfuse sink cannot be built: the langfuse check says so on its own line
            keyless = worker.LANGFUSE in names and not settings.langfuse.enabled
            plan_langfuse = plan_langfuse or keyless
            built = worker.build_sinks([n for n in names if not (keyless and n == worker.LANGFUSE)], settings, store)
        except ConfigError as exc:
            report(False, "sinks", str(exc))
            return
        except ModuleNotFoundError as exc:
            report(False, "sinks", _missing_extra(exc))
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
                try:  # bind and let go at once: a port another process holds fails here, not at `run`
                    worker.bind(settings.http.host, settings.http.port).close()
                except ConfigError as exc:
                    report(False, "source otlp-http", f"{exc} (is a sidecar already running?)")
                else:
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
        key = thread_key or await store.thread_of_trace((trace_id or "").strip().lower())
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
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@friendly_errors
def review_list(config_path: Path | None, show_all: bool, fmt: str) -> None:
    """List open review items (jsonl: one item per line, with every reason)."""
    settings = _settings(config_path)
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
    settings = _settings(config_path)

    async def show(store: SqlStore) -> tuple[Any, list[Any], list[Any]]:
        item = await store.review_item(item_id)
        if item is None:
            return None, [], []
        return item, await store.results(item.thread_key), await store.load_traces(item.thread_key)

    item, stored, traces = _with_store(settings, show)
    if item is None:
        _fail(f"no review item {item_id}")
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
    settings = _settings(config_path)
    ok = _with_store(settings, lambda s: s.resolve_review(item_id, note, time.time()))
    if not ok:
        _fail(f"review item {item_id} does not exist or is not open")
    out().print(f"review item {item_id} resolved")
