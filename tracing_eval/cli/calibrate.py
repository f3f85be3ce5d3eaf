"""`calibrate`: agreement of a metric with human labels, from a labelled file or from Langfuse."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click
import orjson
from rich.markup import escape

from tracing_eval.cli.common import config_option, err, evaluate_with_progress, fail, friendly_errors, out, settings_for
from tracing_eval.config import ConfigError, Settings
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.timespec import parse_since
from tracing_eval.transcripts import TranscriptError, thread_from_json_line


@click.command()
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

    settings = settings_for(config_path, quiet=True)
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
                fail(_nothing_to_compare(units.left_out, positive))
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
            done = asyncio.run(evaluate_with_progress(settings, metrics, threads, 1, explicit=True))
            if done.judge_problem is not None:
                fail(f"judge unusable: {done.judge_problem}", code=3)
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
        fail(str(exc))
    except JudgeUnavailable as exc:
        fail(str(exc), code=3)
    if not any(c.agreement.n for c in comparisons):
        left: dict[str, int] = {}
        for c in comparisons:
            for k, v in c.left_out.items():
                left[k] = left.get(k, 0) + v
        fail(_nothing_to_compare(left, positive))
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
    from tracing_eval.config import DETERMINISTIC_PACK

    if level == "reply":
        return list(REPLY_EVIDENCE)
    return [n for n in DETERMINISTIC_PACK if n != "thread_stats"]


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
    from tracing_eval.app import langfuse_reviewed
    from tracing_eval.calibrate import CalibrationError, join_scored

    try:
        start = parse_since(since)
    except ValueError as exc:
        raise ConfigError(f"--since: {exc}") from None
    subjects = await langfuse_reviewed(settings, human_name, metric, start)
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
