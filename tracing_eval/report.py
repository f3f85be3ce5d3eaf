"""Results to the public JSON contract and to tables for people."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from statistics import fmean
from typing import Any

from rich import box
from rich.table import Table

from tracing_eval.gate import ErrorCause, RunSet
from tracing_eval.model import MetricResult, Status, Thread
from tracing_eval.store.base import ReviewItem


def thread_record(thread_id: str, results: Iterable[MetricResult], turn_count: int | None = None) -> dict[str, Any]:
    """`{"thread_id", "metrics": {...}, "turns": [{"index", "metrics": {...}}]}` for one thread."""
    metrics: dict[str, Any] = {}
    turns: dict[int, dict[str, Any]] = defaultdict(dict)
    for r in results:
        if r.turn_index is None:
            metrics[r.metric] = r.contract()
        else:
            turns[r.turn_index][r.metric] = r.contract()
    indices = range(turn_count) if turn_count is not None else sorted(turns)
    return {
        "thread_id": thread_id,
        "metrics": metrics,
        "turns": [{"index": i, "metrics": turns.get(i, {})} for i in indices],
    }


def metric_means(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Dataset mean per metric: thread scores, or turn scores for metrics that only score turns."""
    thread_scores: dict[str, list[float]] = defaultdict(list)
    turn_scores: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        for name, m in rec["metrics"].items():
            if m["status"] == Status.OK and m["score"] is not None:
                thread_scores[name].append(m["score"])
        for turn in rec["turns"]:
            for name, m in turn["metrics"].items():
                if m["status"] == Status.OK and m["score"] is not None:
                    turn_scores[name].append(m["score"])
    names = set(thread_scores) | set(turn_scores)
    return {n: round(fmean(thread_scores[n] or turn_scores[n]), 4) for n in sorted(names)}


def _cell(m: dict[str, Any]) -> str:
    if m["status"] != Status.OK:
        return m["status"]
    if m["score"] is None:
        return m["label"] or "-"
    text = f"{m['score']:.2f}"
    if m["label"]:
        text += f" {m['label']}"
    return f"[red]{text}[/red]" if m["passed"] is False else text


def _failing(rec: dict[str, Any]) -> str:
    bad = [(n, m) for n, m in sorted(rec["metrics"].items()) if m["passed"] is False or m["status"] == Status.ERROR]
    return ", ".join(f"{n} {_cell(m)}" for n, m in bad)


def results_table(records: list[dict[str, Any]], title: str = "Thread scores", width: int = 80) -> Table:
    """One row per thread. Wide consoles get a column per thread-level metric (failing scores in red);
    narrow ones get the failing metrics and a count of the passing ones."""
    names = sorted({n for rec in records for n in rec["metrics"]})
    table = Table(title=title)
    table.add_column("thread", no_wrap=True)
    table.add_column("turns", justify="right")
    wide = width >= 48 + 16 * len(names)
    if wide:
        for n in names:
            table.add_column(n)
    else:
        table.add_column("failing", overflow="fold")
        table.add_column("passing", justify="right")
    for rec in records:
        key = rec.get("thread_key", rec["thread_id"])
        if wide:
            cells = [_cell(rec["metrics"][n]) if n in rec["metrics"] else "" for n in names]
        else:
            passing = sum(m["passed"] is True for m in rec["metrics"].values())
            cells = [_failing(rec) or "[green]none[/green]", str(passing)]
        table.add_row(key, str(len(rec["turns"])), *cells)
    return table


def review_table(items: list[ReviewItem]) -> Table:
    """One row per item with the names of the failing metrics, compact enough for 80 columns; `review
    show` has the reasons, `review list --format jsonl` everything."""
    table = Table(title="Review queue", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("thread", no_wrap=True, overflow="ellipsis")  # the metrics fold first
    table.add_column("v", justify="right", no_wrap=True)
    table.add_column("status", overflow="fold")
    table.add_column("failing metrics", overflow="fold", min_width=16)
    for it in items:
        why = ", ".join(sorted({str(r["metric"]) for r in it.reasons}))
        status = f"{it.status}: {it.resolution}" if it.resolution else it.status
        table.add_row(str(it.id), it.thread_key, str(it.thread_version), status, why)
    return table


def review_record(item: ReviewItem) -> dict[str, Any]:
    """One review item as a JSON object (`review list --format jsonl`)."""
    return {
        "id": item.id,
        "thread_key": item.thread_key,
        "thread_version": item.thread_version,
        "status": item.status,
        "reasons": item.reasons,
        "created_at": item.created_at,
        "resolved_at": item.resolved_at,
        "resolution": item.resolution,
    }


def conversation_lines(thread: Thread) -> list[str]:
    """The thread as a reviewer reads it: each turn's messages, tool calls with their outcome."""
    lines: list[str] = []
    for turn in thread.turns:
        lines.append(f"[turn {turn.index}]" + (f" error: {turn.error}" if turn.error else ""))
        for m in turn.messages:
            if m.role == "tool":
                continue  # shown with the call that asked for it
            if m.content:
                lines.append(f"  {m.role}: {m.content}")
            for call in m.tool_calls:
                outcome = f"error: {call.error}" if call.error else f"-> {_short(call.result)}"
                lines.append(f"  {m.role} called {call.name}({_short(call.arguments)}) {outcome}")
        if turn.answer_unknown is not None:
            lines.append("  (the answer of this turn could not be read; `tracing-eval inspect` shows why)")
    return lines


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def metrics_table(runs: RunSet, title: str = "Metrics") -> Table:
    """One row per metric: mean (and std dev over runs), coverage, and results by status per run."""
    several = len(runs.runs) > 1
    table = Table(title=title)
    table.add_column("metric", no_wrap=True)
    table.add_column("mean", justify="right")
    if several:
        table.add_column("std", justify="right")
    for col in ("coverage", "ok", "skipped", "n/a", "error"):
        table.add_column(col, justify="right")
    for name in runs.metrics:
        st = runs.stats(name)
        row = [name, "-" if st.mean is None else f"{st.mean:.3f}"]
        if several:
            row.append(f"{st.std:.3f}")
        row.append("-" if st.coverage is None else f"{st.coverage:.0%}")
        row += [f"{st.counts[s]:g}" for s in ("ok", "skipped", "not_applicable")]
        errors = st.counts["error"]
        row.append(f"[red]{errors:g}[/red]" if errors else "0")
        table.add_row(*row)
    return table


def error_lines(causes: dict[str, ErrorCause], total: int) -> list[str]:
    """The closing summary of `error` results: one line per cause, with the metrics and an example."""
    count = sum(c.count for c in causes.values())
    lines = [f"{count} of {total} results ended in error:"]
    for cause, found in causes.items():
        metrics = ", ".join(f"{m} {n}" for m, n in found.metrics.most_common())
        example = found.example if len(found.example) <= 200 else found.example[:199] + "…"
        lines.append(f"  {cause}: {found.count} ({metrics}); e.g. {example}")
    return lines
