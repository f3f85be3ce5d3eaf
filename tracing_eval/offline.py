"""Offline evaluation (`eval FILE`): threads from a file, evaluated N times, without a store.

The judge is checked with one small call before any thread is evaluated, so a wrong address, key
or model is one clear error instead of a retry per metric. During the runs the judge fails fast:
once a call has failed in a way that means the endpoint is unusable (unreachable, refused, rate
limited or failing after its retries), the metrics still asking get an `error` result naming that
first failure without a call, and the run reports the judge as unusable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracing_eval.config import Settings
from tracing_eval.evaluate import evaluate_all
from tracing_eval.judge import JudgeClient, MemoryCache
from tracing_eval.metrics.catalogue import MetricSet
from tracing_eval.metrics.judged.base import JudgeError, JudgeUsage
from tracing_eval.model import Thread
from tracing_eval.report import thread_record

NO_JUDGE = "judge tier skipped: no judge configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)"


class JudgeUnavailable(Exception):
    """The judge cannot be used: none is configured for a judged metric, or it cannot be reached."""


@dataclass
class OfflineRuns:
    """Records of every run (input order), and why the judge became unusable, if it did."""

    runs: list[list[dict[str, Any]]]
    judge_problem: str | None = None
    judge_skipped: bool = False
    usage: JudgeUsage | None = None
    retries: int = 0


def select_metrics(metrics: MetricSet, judge_enabled: bool, explicit: bool) -> tuple[MetricSet, bool]:
    """The metrics that can run, and whether judged ones were dropped. Judged metrics named on the
    command line without a judge are an error; the configured default set just loses them."""
    if not metrics.judged or judge_enabled:
        return metrics, False
    if explicit:
        names = ", ".join(m.spec.name for m in metrics.judged)
        raise JudgeUnavailable(
            f"{names}: needs a judge and none is configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)"
        )
    return MetricSet(metrics.deterministic, [], metrics.options), True


async def check_judge(judge: JudgeClient) -> None:
    """One small real call; raises JudgeUnavailable with the reason when it fails."""
    try:
        await judge.check()
    except JudgeError as exc:
        raise JudgeUnavailable(f"judge unusable: {exc}") from None


async def evaluate_runs(
    settings: Settings,
    metrics: MetricSet,
    threads: list[Thread],
    runs: int = 1,
    *,
    explicit: bool = False,
    on_done: Callable[[], None] | None = None,
) -> OfflineRuns:
    """Evaluate every thread `runs` times (judge calls of all threads and runs overlap, within the
    judge's limits). With several runs the judge's answer cache is off, so each run asks afresh."""
    metrics, skipped = select_metrics(metrics, settings.judge.enabled, explicit)
    judge: JudgeClient | None = None
    if metrics.judged:
        judge = JudgeClient(settings.judge, MemoryCache() if runs == 1 else None, fail_fast=True)
    gate = asyncio.Semaphore(settings.judge.max_concurrency if judge else 1)

    async def one(thread: Thread) -> dict[str, Any]:
        async with gate:
            results = await evaluate_all(thread, metrics, judge.for_thread(thread.key) if judge else None)
        if on_done is not None:
            on_done()
        return thread_record(thread.key, results, len(thread.turns))

    try:
        if judge is not None:
            await check_judge(judge)
        done = await asyncio.gather(*(one(t) for _ in range(runs) for t in threads))
    finally:
        if judge is not None:
            await judge.close()
    n = len(threads)
    return OfflineRuns(
        runs=[list(done[i * n : (i + 1) * n]) for i in range(runs)],
        judge_problem=judge.unusable if judge else None,
        judge_skipped=skipped,
        usage=judge.usage if judge else None,
        retries=judge.retries if judge else 0,
    )
