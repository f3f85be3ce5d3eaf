"""`eval`: evaluate conversation files offline, with baselines and several runs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import orjson
from click.core import ParameterSource
from rich.markup import escape

from tracing_eval.cli.common import config_option, err, evaluate_with_progress, fail, friendly_errors, out, settings_for
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.report import error_lines, metric_means, metrics_table, results_table
from tracing_eval.transcripts import TranscriptError, thread_from_json_line


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


@click.command("eval")
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

    settings = settings_for(config_path, quiet=True)
    names = [n.strip() for n in metric_names.split(",") if n.strip()] if metric_names else None
    metrics = build_metrics(settings, names)
    try:
        base = gate.load_baseline(baseline.read_bytes(), str(baseline)) if baseline else None
    except gate.BaselineError as exc:
        fail(str(exc))
    bad: list[str] = []
    threads = list(_read_threads(file, bad))
    if base is not None and not base.thread_ids & {t.key for t in threads}:
        fail(gate.unrelated(base, str(file)))
    try:
        done = asyncio.run(evaluate_with_progress(settings, metrics, threads, runs, explicit=names is not None))
    except JudgeUnavailable as exc:
        fail(str(exc), code=3)
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
        fail(f"judge unusable: {done.judge_problem}{not_written}", code=3)
    report = gate.compare(current, base, tolerance, coverage_tolerance) if base is not None else None
    if report is not None:
        for line in report.notes:
            err().print(f"note: {escape(line)}")
        for line in report.flips:
            err().print(f"[yellow]flipped[/yellow] {escape(line)}")
        for line in report.failures:
            err().print(f"[bold red]regression[/bold red] {escape(line)}")
    if bad:
        fail(f"{len(bad)} line(s) of {file} could not be read (see above)", code=2)
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
