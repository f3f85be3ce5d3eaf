"""The judged tier over one thread: every judged metric, thread questions batched when configured.

Each metric gets its own `JudgeContext` (its options) over one shared `Transcripts`, so the thread
is rendered once. With `judge.batch_thread_metrics`, the thread metrics that are one question
about the transcript are asked in one request (`batch.ask_batch`); the others, and per-turn
metrics, run on their own, all at once. A metric that raises yields one `error` result.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tracing_eval.metrics.judged.base import Judge, JudgeContext, JudgedMetric
from tracing_eval.metrics.judged.batch import ask_batch
from tracing_eval.metrics.judged.question import Question
from tracing_eval.metrics.judged.transcript import Limits, Transcripts
from tracing_eval.metrics.results import failed
from tracing_eval.model import MetricResult, Thread


def _timed(results: list[MetricResult], started: float) -> list[MetricResult]:
    elapsed = (time.perf_counter() - started) * 1000 / max(1, len(results))
    for r in results:
        r.duration_ms = round(elapsed, 3)
    return results


async def evaluate_judged(
    thread: Thread,
    metrics: list[JudgedMetric],
    judge: Judge,
    deterministic: list[MetricResult],
    options_of: Callable[[str], dict[str, Any]],
    reuse: dict[tuple[str, str], MetricResult] | None = None,
    from_turn: int = 0,
) -> list[MetricResult]:
    """Results of every judged metric for the thread, in metric order (`from_turn`: see
    `JudgeContext.from_turn`)."""
    transcripts = Transcripts(thread, Limits(budget_tokens=judge.settings.transcript_budget))
    contexts = {
        m.spec.name: JudgeContext(judge, transcripts, deterministic, options_of(m.spec.name), reuse or {}, from_turn)
        for m in metrics
    }
    settled: dict[str, list[MetricResult]] = {}
    questions: list[Question[Any]] = []
    solo: list[JudgedMetric] = []
    for m in metrics:
        ask = getattr(m, "question", None) if judge.settings.batch_thread_metrics else None
        if ask is None:
            solo.append(m)
            continue
        started = time.perf_counter()
        try:
            found = ask(thread, contexts[m.spec.name])
        except Exception as exc:  # a metric bug must not lose the thread's other scores
            settled[m.spec.name] = [failed(m.spec, exc, "judge failed")]
            continue
        if isinstance(found, Question):
            questions.append(found)
        elif found is None:
            solo.append(m)
        else:
            settled[m.spec.name] = _timed(found, started)
    if len(questions) == 1:
        solo.append(next(m for m in metrics if m.spec.name == questions[0].spec.name))
        questions = []

    async def alone(metric: JudgedMetric) -> None:
        started = time.perf_counter()
        try:
            results = await metric.evaluate(thread, contexts[metric.spec.name])
        except Exception as exc:  # the metric's own handling missed it: still one clear error
            results = [failed(metric.spec, exc, "judge failed")]
        settled[metric.spec.name] = _timed(results, started)

    async def together() -> None:
        started = time.perf_counter()
        try:
            by_metric = await ask_batch(questions, thread, contexts[questions[0].spec.name])
        except Exception as exc:  # a bug in a finish step: every batched metric says so
            by_metric = {q.spec.name: [failed(q.spec, exc, "judge failed")] for q in questions}
        for name, results in by_metric.items():
            settled[name] = _timed(results, started)

    await asyncio.gather(*(alone(m) for m in solo), *([together()] if questions else []))
    return [r for m in metrics for r in settled.get(m.spec.name, [])]
