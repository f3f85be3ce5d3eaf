"""Failed threads in the state store: threads with failing results, or threads in the review queue.

Filters: the metrics that failed, the labels they carry, a time range (the thread's last activity,
or when the review item was created) and, for the review queue, the item's status.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tracing_eval.assemble import thread_from_stored
from tracing_eval.model import MetricResult, Thread
from tracing_eval.scenarios import FailedThread, Failure, failing, failure_of
from tracing_eval.store.sql import SqlStore


@dataclass(frozen=True)
class Selection:
    """Which failures to export; empty collections mean any."""

    metrics: frozenset[str] = frozenset()
    labels: frozenset[str] = frozenset()
    since: float | None = None
    until: float | None = None
    review_status: str | None = "open"  # review queue only; None: any status
    limit: int | None = None

    def in_time(self, moment: float) -> bool:
        return (self.since is None or moment >= self.since) and (self.until is None or moment < self.until)


async def _thread(store: SqlStore, key: str, version: int) -> Thread:
    """The thread as evaluated: stored turns, and traces assembled from their spans where needed."""
    return thread_from_stored(await store.load_thread(key), source=key.partition(":")[0], version=version)[0]


async def from_store(store: SqlStore, selection: Selection) -> list[FailedThread]:
    """Threads whose stored results fail (under the selection), most recently active first."""
    by_thread: dict[str, list[MetricResult]] = defaultdict(list)
    for stored in await store.results():
        by_thread[stored.thread_key].append(stored.result)
    states = sorted(await store.thread_states(), key=lambda s: -s["last_activity_at"])
    out: list[FailedThread] = []
    for state in states:
        results = by_thread.get(state["key"], [])
        failures = failing(results, selection.metrics, selection.labels)
        if not failures or not selection.in_time(state["last_activity_at"]):
            continue
        thread = await _thread(store, state["key"], state["version"])
        if thread.turns:
            out.append(FailedThread(thread, failures, results, {"origin": "store"}))
        if selection.limit is not None and len(out) >= selection.limit:
            break
    return out


def _review_failures(reasons: Iterable[dict[str, object]], results: list[MetricResult]) -> list[Failure]:
    """The item's reasons, with the evidence of the stored result each one names."""
    by_target = {(r.metric, "thread" if r.turn_index is None else f"turn {r.turn_index}"): r for r in results}
    out = []
    for reason in reasons:
        stored = by_target.get((str(reason.get("metric")), str(reason.get("target"))))
        if stored is not None:
            out.append(failure_of(stored))
        else:
            score = reason.get("score")
            out.append(
                Failure(
                    metric=str(reason.get("metric")),
                    target=str(reason.get("target") or "thread").replace(" ", ":"),
                    score=float(score) if isinstance(score, int | float) else None,
                    label=str(reason["label"]) if reason.get("label") is not None else None,
                    reason=str(reason.get("reason") or ""),
                )
            )
    return out


async def from_review(store: SqlStore, selection: Selection) -> list[FailedThread]:
    """Threads in the local review queue (newest item first), one per thread."""
    items = sorted(await store.review_items(selection.review_status), key=lambda i: -i.created_at)
    out: list[FailedThread] = []
    seen: set[str] = set()
    for item in items:
        if item.thread_key in seen or not selection.in_time(item.created_at):
            continue
        results = [s.result for s in await store.results(item.thread_key)]
        failures = [
            f
            for f in _review_failures(item.reasons, results)
            if (not selection.metrics or f.metric in selection.metrics)
            and (not selection.labels or f.label in selection.labels)
        ]
        if not failures:
            continue
        thread = await _thread(store, item.thread_key, item.thread_version)
        if not thread.turns:
            continue
        seen.add(item.thread_key)
        origin = {"origin": "review", "review_item": item.id, "review_status": item.status}
        out.append(FailedThread(thread, failures, results, origin))
        if selection.limit is not None and len(out) >= selection.limit:
            break
    return out
