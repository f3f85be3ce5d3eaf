"""Agreement results as a JSON document and as rich tables (`tracing-eval calibrate`)."""

from __future__ import annotations

from typing import Any

from rich.box import SIMPLE
from rich.table import Table

from tracing_eval.agreement import STATS
from tracing_eval.calibrate import Comparison

#: statistics that need a positive label set (the rest need an ordinal rating)
BINARY = ("kappa", "precision", "recall", "f1", "accuracy", "false_alarm_rate")


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def comparison_json(c: Comparison) -> dict[str, Any]:
    a = c.agreement
    return {
        "metric": c.metric,
        "level": c.level,
        "units": a.n,
        "human_positive": a.positives,
        "flagged": a.flagged,
        "confusion": {"tp": a.confusion.tp, "fp": a.confusion.fp, "fn": a.confusion.fn, "tn": a.confusion.tn},
        "stats": {k: _round(a.stats.get(k)) for k in STATS},
        "intervals": {k: [_round(v[0]), _round(v[1])] if v else None for k, v in a.intervals.items()},
        "not_applicable": c.not_applicable,
        "left_out": dict(sorted(c.left_out.items())),
    }


def _value(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def stats_table(c: Comparison) -> Table:
    """One metric: each statistic with its bootstrap interval, then the counts."""
    a = c.agreement
    table = Table(title=f"{c.metric} ({c.level} level)")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    table.add_column("95% interval", justify="right")
    for name in STATS:
        ci = a.intervals.get(name)
        table.add_row(name.replace("_", " "), _value(a.stats.get(name)), f"{ci[0]:.3f} - {ci[1]:.3f}" if ci else "")
    table.add_row("units", str(a.n), "")
    table.add_row("human positive", str(a.positives), "")
    table.add_row("flagged", str(a.flagged), "")
    return table


SUMMARY = {
    "kappa": "kappa",
    "precision": "prec",
    "recall": "rec",
    "f1": "F1",
    "false_alarm_rate": "FA",
    "spearman": "rho",
    "roc_auc": "AUC",
}


def summary_table(comparisons: list[Comparison]) -> Table:
    """One row per metric: units (n), human positives, flagged and the main statistics (intervals: JSON)."""
    shown = [s for s in SUMMARY if any(c.agreement.stats.get(s) is not None for c in comparisons)]
    levels = {c.level for c in comparisons}
    table = Table(
        title="Agreement by metric" + (f" ({levels.pop()} level)" if len(levels) == 1 else ""),
        box=SIMPLE,
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    table.add_column("metric", no_wrap=True)
    if len(levels) > 1:
        table.add_column("level")
    for col in ("n", "pos", "flag"):
        table.add_column(col, justify="right")
    for s in shown:
        table.add_column(SUMMARY[s], justify="right")
    for c in comparisons:
        a = c.agreement
        level = [c.level] if len(levels) > 1 else []
        table.add_row(
            c.metric, *level, str(a.n), str(a.positives), str(a.flagged), *(_value(a.stats.get(s), 2) for s in shown)
        )
    return table


def confusion_table(c: Comparison) -> Table:
    k = c.agreement.confusion
    table = Table(title=f"{c.metric}: confusion")
    table.add_column("")
    table.add_column("human positive", justify="right")
    table.add_column("human negative", justify="right")
    table.add_row("flagged", str(k.tp), str(k.fp))
    table.add_row("not flagged", str(k.fn), str(k.tn))
    return table
