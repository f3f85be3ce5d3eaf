"""The CI gate: runs of `eval` summarised per thread and metric, baselines on disk, and the comparison.

A run is `{thread id: {metric: Cell}}`; a `RunSet` holds one or more runs over the same threads.
Both baseline forms load into a `RunSet`: the JSON lines `eval --out x.jsonl` writes (one run, or
several with a `run` field) and the summary `eval --runs N --out x.json` writes. The gate compares
the threads both sides share and fails, with one line per reason, when a baseline metric is
missing, its coverage (scored / applicable results) drops beyond a tolerance, it has more errors
than the baseline, or its mean falls more than the tolerance below the baseline's mean. Threads
whose pass/fail verdict was the same in every baseline run and is now the opposite are reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import fmean, stdev
from typing import Any

import orjson

from tracing_eval.judge import failure_cause

FORMAT_KEY = "tracing_eval_baseline"
FORMAT_VERSION = 1
STATUSES = ("ok", "skipped", "not_applicable", "error")


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message says what it is instead."""


@dataclass
class Cell:
    """One metric on one thread in one run: results by status, the scores and the verdict."""

    counts: Counter[str] = field(default_factory=Counter)
    score: float | None = None  # the thread-level score
    turn_sum: float = 0.0  # per-turn scores (metrics that only score turns)
    turns_scored: int = 0
    passed: bool | None = None  # the thread-level verdict; else False when any turn failed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {s: self.counts[s] for s in STATUSES if self.counts[s]}
        if self.score is not None:
            out["score"] = self.score
        if self.turns_scored:
            out["turn_mean"] = round(self.turn_sum / self.turns_scored, 6)
            out["turns_scored"] = self.turns_scored
        if self.passed is not None:
            out["passed"] = self.passed
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cell:
        turns = int(data.get("turns_scored") or 0)
        return cls(
            counts=Counter({s: int(data[s]) for s in STATUSES if data.get(s)}),
            score=data.get("score"),
            turn_sum=float(data.get("turn_mean") or 0.0) * turns,
            turns_scored=turns,
            passed=data.get("passed"),
        )


Run = dict[str, dict[str, Cell]]


def cells_of(record: Mapping[str, Any]) -> dict[str, Cell]:
    """The cells of one `eval` output record (`{"thread_id", "metrics", "turns"}`)."""
    cells: dict[str, Cell] = defaultdict(Cell)
    for name, m in record["metrics"].items():
        cell = cells[name]
        cell.counts[m["status"]] += 1
        if m["status"] == "ok" and m["score"] is not None:
            cell.score = m["score"]
        if m["status"] == "ok" and m["passed"] is not None:
            cell.passed = m["passed"]
    turn_verdicts: dict[str, list[bool]] = defaultdict(list)
    for turn in record["turns"]:
        for name, m in turn["metrics"].items():
            cell = cells[name]
            cell.counts[m["status"]] += 1
            if m["status"] == "ok" and m["score"] is not None:
                cell.turn_sum += m["score"]
                cell.turns_scored += 1
            if m["status"] == "ok" and m["passed"] is not None:
                turn_verdicts[name].append(m["passed"])
    for name, verdicts in turn_verdicts.items():
        if cells[name].passed is None:
            cells[name].passed = all(verdicts)
    return dict(cells)


def run_of(records: Iterable[Mapping[str, Any]]) -> Run:
    return {str(r["thread_id"]): cells_of(r) for r in records}


@dataclass(frozen=True)
class MetricStats:
    """A metric over a run set: mean over all runs, std dev of the run means, results by status."""

    mean: float | None
    std: float
    run_means: list[float | None]
    counts: dict[str, float]  # per run, averaged over the runs

    @property
    def coverage(self) -> float | None:
        """Scored results among those that should have scored (`not_applicable` excluded)."""
        due = self.counts["ok"] + self.counts["skipped"] + self.counts["error"]
        return self.counts["ok"] / due if due else None

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "std": round(self.std, 6),
            "run_means": self.run_means,
            "coverage": None if self.coverage is None else round(self.coverage, 6),
            "per_run": {s: round(self.counts[s], 3) for s in STATUSES},
        }


def _mean(cells: list[Cell]) -> float | None:
    """Thread-level scores when the metric has any, else every per-turn score (like `metric_means`)."""
    scores = [c.score for c in cells if c.score is not None]
    if scores:
        return round(fmean(scores), 6)
    n = sum(c.turns_scored for c in cells)
    return round(sum(c.turn_sum for c in cells) / n, 6) if n else None


@dataclass
class RunSet:
    """One or more runs over the same threads; `origin` names it in messages."""

    runs: list[Run]
    origin: str = "this run"

    @property
    def thread_ids(self) -> set[str]:
        return {t for run in self.runs for t in run}

    @property
    def metrics(self) -> list[str]:
        return sorted({m for run in self.runs for cells in run.values() for m in cells})

    def restrict(self, thread_ids: set[str]) -> RunSet:
        return RunSet([{t: c for t, c in run.items() if t in thread_ids} for run in self.runs], self.origin)

    def cells(self, metric: str) -> list[list[Cell]]:
        return [[cells[metric] for cells in run.values() if metric in cells] for run in self.runs]

    def stats(self, metric: str) -> MetricStats:
        per_run = self.cells(metric)
        run_means = [_mean(cells) for cells in per_run]
        known = [m for m in run_means if m is not None]
        counts: Counter[str] = Counter()
        for cells in per_run:
            for c in cells:
                counts.update(c.counts)
        n = max(1, len(self.runs))
        return MetricStats(
            mean=_mean([c for cells in per_run for c in cells]),
            std=stdev(known) if len(known) > 1 else 0.0,
            run_means=run_means,
            counts={s: counts[s] / n for s in STATUSES},
        )

    def verdicts(self, thread_id: str, metric: str) -> list[bool]:
        """The thread's pass/fail on the metric in each run that gave one."""
        out = []
        for run in self.runs:
            cell = run.get(thread_id, {}).get(metric)
            if cell is not None and cell.passed is not None:
                out.append(cell.passed)
        return out


# -- files ---------------------------------------------------------------------------------------


def runs_from_records(records: list[dict[str, Any]], origin: str) -> RunSet:
    """Records of one run, or of several when they carry `run` (as `eval --runs N --format jsonl` prints)."""
    by_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_run[int(r.get("run", 1))].append(r)
    return RunSet([run_of(by_run[k]) for k in sorted(by_run)], origin)


def baseline_document(runs: RunSet, source: str) -> dict[str, Any]:
    """The `--runs N --out baseline.json` file: per-metric summary, then per-thread cells by run."""
    threads = sorted(runs.thread_ids)
    return {
        FORMAT_KEY: FORMAT_VERSION,
        "input": source,
        "runs": len(runs.runs),
        "threads": len(threads),
        "metrics": {m: runs.stats(m).to_json() for m in runs.metrics},
        "verdicts": {t: {m: runs.verdicts(t, m) for m in runs.metrics if runs.verdicts(t, m)} for t in threads},
        "cells": [{t: {m: c.to_json() for m, c in cells.items()} for t, cells in run.items()} for run in runs.runs],
    }


def _record_problem(obj: Any, where: str) -> str | None:
    """Why a JSON value is not an `eval` output record (None when it is one)."""
    if not isinstance(obj, dict):
        return f"{where} is not a JSON object"
    if isinstance(obj.get("turns"), list) and any(isinstance(t, dict) and "role" in t for t in obj["turns"]):
        return f"{where} is a transcript (eval input), not eval output: run `tracing-eval eval FILE --out baseline.jsonl` first"
    if "goal" in obj and "transcript" in obj:
        return f"{where} is a scenario (scenarios export), not eval output"
    if "thread_id" not in obj or not isinstance(obj.get("metrics"), dict) or not isinstance(obj.get("turns"), list):
        return f"{where} is neither a tracing-eval baseline nor `eval` output (no thread_id, metrics and turns)"
    for turn in obj["turns"]:
        if not isinstance(turn, dict) or not isinstance(turn.get("metrics"), dict):
            return f"{where}: every turn must be an object with metrics"
    for m in [*obj["metrics"].values(), *(x for t in obj["turns"] for x in t["metrics"].values())]:
        if not isinstance(m, dict) or m.get("status") not in STATUSES or "score" not in m or "passed" not in m:
            return f"{where}: a metric result without score, passed and a known status"
    return None


def _from_document(doc: dict[str, Any], name: str) -> RunSet:
    if doc[FORMAT_KEY] != FORMAT_VERSION:
        raise BaselineError(f"{name} is a baseline of format {doc[FORMAT_KEY]!r}; this version reads {FORMAT_VERSION}")
    cells = doc.get("cells")
    if not isinstance(cells, list) or not all(isinstance(run, dict) for run in cells):
        raise BaselineError(f"{name}: 'cells' must be a list of runs")
    try:
        runs = [{str(t): {m: Cell.from_json(c) for m, c in ms.items()} for t, ms in run.items()} for run in cells]
    except (AttributeError, TypeError, ValueError) as exc:
        raise BaselineError(f"{name}: a cell cannot be read ({exc})") from None
    return RunSet(runs, name)


def load_baseline(data: bytes, name: str) -> RunSet:
    """A baseline from file content: the summary JSON, `--format json` output, or `--format jsonl` lines."""
    if not data.strip():
        raise BaselineError(f"baseline {name} is empty")
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and FORMAT_KEY in whole:
        runs = _from_document(whole, name)
    elif isinstance(whole, dict) and isinstance(whole.get("threads"), list):  # `eval --format json` output
        records = whole["threads"]
        for i, r in enumerate(records):
            if (problem := _record_problem(r, f"baseline {name}: thread {i + 1}")) is not None:
                raise BaselineError(problem)
        runs = runs_from_records(records, name)
    elif whole is not None and not isinstance(whole, dict):
        raise BaselineError(f"baseline {name} is JSON but not a tracing-eval baseline or `eval` output")
    else:
        records = []
        for n, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise BaselineError(
                    f"baseline {name} line {n} is not JSON ({exc}); expected `eval --out` output"
                ) from None
            if (problem := _record_problem(obj, f"baseline {name} line {n}")) is not None:
                raise BaselineError(problem)
            records.append(obj)
        runs = runs_from_records(records, name)
    if not runs.thread_ids:
        raise BaselineError(f"baseline {name} holds no threads")
    return runs


# -- the comparison ------------------------------------------------------------------------------


@dataclass
class GateReport:
    """What the gate found: failures (each one line), notes and flipped threads."""

    compared: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flips: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def compare(current: RunSet, baseline: RunSet, tolerance: float, coverage_tolerance: float) -> GateReport:
    """The gate over the threads both sides share. Raises BaselineError when they share none."""
    shared = current.thread_ids & baseline.thread_ids
    if not shared:
        raise BaselineError(unrelated(baseline, current.origin))
    report = GateReport(compared=len(shared))
    if missing := len(baseline.thread_ids - shared):
        report.notes.append(f"{missing} baseline thread(s) are not in this input; compared on {len(shared)} shared")
    if new := len(current.thread_ids - shared):
        report.notes.append(f"{new} thread(s) are not in the baseline and are not compared")
    now, base = current.restrict(shared), baseline.restrict(shared)
    now_metrics = set(now.metrics)
    for name in base.metrics:
        b = base.stats(name)
        if name not in now_metrics:
            report.failures.append(
                f"{name}: in the baseline but not in this run (not selected, or its judge is not configured)"
            )
            continue
        c = now.stats(name)
        if c.counts["error"] > b.counts["error"]:
            report.failures.append(
                f"{name}: {c.counts['error']:g} error result(s) per run, baseline {b.counts['error']:g}"
            )
        if b.coverage is not None and (c.coverage or 0.0) < b.coverage - coverage_tolerance:
            report.failures.append(
                f"{name}: coverage {_fmt(c.coverage)} (scored / applicable results) is below baseline "
                f"{_fmt(b.coverage)} - coverage tolerance {coverage_tolerance}"
            )
        if b.mean is not None and c.mean is None:
            report.failures.append(f"{name}: no score in this run (baseline mean {_fmt(b.mean)})")
        elif b.mean is not None and c.mean is not None and c.mean < b.mean - tolerance:
            report.failures.append(
                f"{name}: mean {_fmt(c.mean)} is below baseline {_fmt(b.mean)} - tolerance {tolerance}"
                f" (baseline std {b.std:.4f} over {len(base.runs)} run(s))"
            )
        report.flips += flips(now, base, name)
    for name in sorted(now_metrics - set(base.metrics)):
        report.notes.append(f"{name}: not in the baseline, not compared")
    return report


def unrelated(baseline: RunSet, origin: str) -> str:
    return (
        f"baseline {baseline.origin} shares no thread ids with {origin} "
        f"({len(baseline.thread_ids)} baseline threads): is it the baseline of another file?"
    )


def flips(current: RunSet, baseline: RunSet, metric: str) -> list[str]:
    """Threads whose verdict was the same in every baseline run and is now the opposite (by majority)."""
    out = []
    for thread in sorted(current.thread_ids & baseline.thread_ids):
        before, now = baseline.verdicts(thread, metric), current.verdicts(thread, metric)
        if not before or not now or len(set(before)) != 1:
            continue
        fails = now.count(False)
        if fails * 2 == len(now):
            continue  # no majority either way
        if (fails * 2 < len(now)) != before[0]:
            was, became = ("passed", "fails") if before[0] else ("failed", "passes")
            count = fails if before[0] else len(now) - fails
            out.append(
                f"{thread} {metric}: {was} in all {len(before)} baseline run(s), now {became} "
                f"({count}/{len(now)} run(s))"
            )
    return out


# -- errors ------------------------------------------------------------------------------------


def error_cause(reason: str) -> str:
    """The cause of an `error` result, from its reason."""
    if reason.startswith("judge failed: "):
        return failure_cause(reason)
    if reason.startswith("metric failed: "):
        return "metric raised " + reason.removeprefix("metric failed: ").split(":", 1)[0]
    if reason.startswith("invalid option: "):
        return "invalid metric option"
    return "metric error"


@dataclass
class ErrorCause:
    count: int = 0
    metrics: Counter[str] = field(default_factory=Counter)
    example: str = ""


def result_count(records: Iterable[Mapping[str, Any]]) -> int:
    return sum(len(r["metrics"]) + sum(len(t["metrics"]) for t in r["turns"]) for r in records)


def errors_by_cause(records: Iterable[Mapping[str, Any]]) -> dict[str, ErrorCause]:
    """Every `error` result of the records, grouped by cause, most frequent first."""
    found: dict[str, ErrorCause] = defaultdict(ErrorCause)
    for rec in records:
        results = [*rec["metrics"].items(), *(x for t in rec["turns"] for x in t["metrics"].items())]
        for name, m in results:
            if m["status"] != "error":
                continue
            cause = found[error_cause(str(m.get("reason") or ""))]
            cause.count += 1
            cause.metrics[name] += 1
            cause.example = cause.example or str(m.get("reason") or "")
    return dict(sorted(found.items(), key=lambda kv: -kv[1].count))
