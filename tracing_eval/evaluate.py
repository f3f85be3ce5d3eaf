"""Run metrics over a thread: the deterministic tier first, then the judged tier concurrently.

Failures are isolated: a metric that raises yields one `error` result with the reason, and the
thread's other metrics still score.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tracing_eval.metrics.base import Metric, MetricBase, MetricSpec
from tracing_eval.metrics.catalogue import MetricSet
from tracing_eval.metrics.judged.base import Judge
from tracing_eval.metrics.judged.tier import evaluate_judged
from tracing_eval.metrics.results import failed, not_applicable
from tracing_eval.model import MetricResult, Scope, Thread, Unreadable

#: Thread metadata keys that are metric options (e.g. from the `eval` input line).
THREAD_OPTION_KEYS = ("task_description", "success_criteria", "role")


def _timed(results: list[MetricResult], started: float) -> list[MetricResult]:
    elapsed = (time.perf_counter() - started) * 1000 / max(1, len(results))
    for r in results:
        r.duration_ms = round(elapsed, 3)
    return results


def unknown_answers(spec: MetricSpec, thread: Thread, results: list[MetricResult]) -> list[MetricResult]:
    """Unknown is not empty: where a turn's answer could not be read, a metric that needs answers
    is `not_applicable` for that turn, and for the whole thread, with the reason and where the
    answer was looked for, instead of judging a reply that is missing."""
    unknown = {t.index: t.answer_unknown for t in thread.turns if t.answer_unknown is not None}
    if not unknown or not spec.needs_answer:
        return results
    out = []
    for r in results:
        if r.turn_index is None:
            turns = ", ".join(str(i) for i in sorted(unknown))
            why = f"the answer of turn(s) {turns} could not be read; {next(iter(unknown.values())).describe()}"
            out.append(_unreadable(spec, r, why, list(unknown.values())))
        elif r.turn_index in unknown:
            out.append(_unreadable(spec, r, unknown[r.turn_index].describe(), [unknown[r.turn_index]]))
        else:
            out.append(r)
    return out


def _unanswerable(spec: MetricSpec, thread: Thread) -> bool:
    """A metric that needs answers, on a thread where it could only be `not_applicable`: it scores
    whole threads and an answer is unknown, or every answer is unknown."""
    unknown = [t.answer_unknown is not None for t in thread.turns]
    return spec.needs_answer and any(unknown) and ("turn" not in spec.scopes or all(unknown))


def _unreadable(spec: MetricSpec, r: MetricResult, reason: str, where: list[Unreadable]) -> MetricResult:
    evidence = {"unknown_answer": [u.model_dump() for u in where]}
    return not_applicable(spec, reason, turn_index=r.turn_index, evidence=evidence)


def evaluate_thread(thread: Thread, metrics: Sequence[Metric], from_turn: int = 0) -> list[MetricResult]:
    """The deterministic tier: all results for the thread, in metric order. With `from_turn`, a metric
    may leave out its thread result and the results of the turns before it (`MetricBase.evaluate_from`)."""
    out: list[MetricResult] = []
    for metric in metrics:
        started = time.perf_counter()
        try:
            found = (
                metric.evaluate_from(thread, from_turn)
                if from_turn and isinstance(metric, MetricBase)
                else metric.evaluate(thread)
            )
            results = unknown_answers(metric.spec, thread, found)
        except Exception as exc:  # a metric bug must not lose the thread's other scores
            results = [failed(metric.spec, exc, f"metric failed: {type(exc).__name__}")]
        out.extend(_timed(results, started))
    return out


def metric_options(metric: str, configured: dict[str, dict[str, Any]], thread: Thread) -> dict[str, Any]:
    """Config options of a metric, overridden by the thread's own metadata (task, criteria, role)."""
    options = dict(configured.get(metric, {}))
    options.update({k: thread.metadata[k] for k in THREAD_OPTION_KEYS if thread.metadata.get(k)})
    return options


async def evaluate_all(
    thread: Thread,
    metrics: MetricSet,
    judge: Judge | None,
    reuse: dict[tuple[str, str], MetricResult] | None = None,
    *,
    turns_only: bool = False,
    from_turn: int = 0,
) -> list[MetricResult]:
    """Both tiers. Without a judge only the deterministic tier runs. With `turns_only` (a thread
    still active) only per-turn results are made: the metrics that only score whole threads wait
    for the thread to go idle, and the thread results of the others are left out, as are the
    results of turns before `from_turn` (turns that did not change since they were evaluated)."""
    if turns_only:
        results = await _both_tiers(thread, _per_turn(metrics), judge, reuse, from_turn)
        return [
            r for r in results if r.scope is not Scope.THREAD and (r.turn_index is None or r.turn_index >= from_turn)
        ]
    return await _both_tiers(thread, metrics, judge, reuse)


def _per_turn(metrics: MetricSet) -> MetricSet:
    """The metrics of `metrics` that score single turns."""
    return MetricSet(
        deterministic=[m for m in metrics.deterministic if "turn" in m.spec.scopes],
        judged=[m for m in metrics.judged if "turn" in m.spec.scopes],
        options=metrics.options,
    )


async def _both_tiers(
    thread: Thread,
    metrics: MetricSet,
    judge: Judge | None,
    reuse: dict[tuple[str, str], MetricResult] | None,
    from_turn: int = 0,
) -> list[MetricResult]:
    deterministic = evaluate_thread(thread, metrics.deterministic, from_turn)
    judged_metrics = metrics.judged
    if judge is None or not judged_metrics or not thread.turns:
        return deterministic
    placeholders: dict[str, list[MetricResult]] = {}
    for m in judged_metrics:
        if _unanswerable(m.spec, thread):  # every result would be not_applicable: spare the judge
            placeholder = not_applicable(m.spec, "")
            placeholders[m.spec.name] = unknown_answers(m.spec, thread, [placeholder])
    asked = [m for m in judged_metrics if m.spec.name not in placeholders]
    judged = await evaluate_judged(
        thread,
        asked,
        judge,
        deterministic,
        lambda name: metric_options(name, metrics.options, thread),
        reuse,
        from_turn,
    )
    by_metric: dict[str, list[MetricResult]] = {}
    for r in judged:
        by_metric.setdefault(r.metric, []).append(r)
    out = list(deterministic)
    for m in judged_metrics:
        name = m.spec.name
        out += placeholders.get(name) or unknown_answers(m.spec, thread, by_metric.get(name, []))
    return out
