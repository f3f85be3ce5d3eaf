"""Retention: old data leaves the store in small transactions, on a schedule of its own.

One run works through the steps below, each in batches of a few threads or rows (every batch is one
short transaction, so ingest and evaluation never wait long), until nothing is left or its time is up
(the next run goes on):

1. spans, log events and histories of threads evaluated at their last version (or not sampled) and
   idle for `spans_days` (threads idle for less than an hour are never touched, whatever the settings): their turns stay, as the compact transcript the store keeps per trace
   (traces never assembled, e.g. stored by an older tracing-eval, are assembled first);
2. everything of threads idle for `results_days`;
3. delivered outbox rows after `outbox_days`, parked ones after `results_days`; review items resolved,
   superseded or forwarded before `review_days`; judge answers older than `spans_days`;
4. the space freed, given back to the file system (SQLite's incremental vacuum; PostgreSQL's
   autovacuum reuses it by itself, helped by the small transactions).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tracing_eval.assemble import thread_from_stored
from tracing_eval.config import RetentionSettings
from tracing_eval.store.base import Store
from tracing_eval.store.history import RETENTION_FLOOR_SECONDS

DAY = 86400.0
#: Threads whose data goes per transaction
THREADS_PER_BATCH = 20
#: Rows of the outbox, review items or judge answers deleted per transaction
ROWS_PER_BATCH = 1000
#: Free pages given back to the file system per step (4 KiB each by default)
PAGES_PER_STEP = 2048
#: How long one run may go on; what is left waits for the next run
RUN_SECONDS = 60.0


@dataclass
class RetentionRun:
    """What one run deleted (rows per table or kind), pages given back, and whether it finished."""

    deleted: Counter[str] = field(default_factory=Counter)
    reclaimed_pages: int = 0
    finished: bool = True


async def retain(
    store: Store,
    settings: RetentionSettings,
    now: float,
    *,
    budget_seconds: float = RUN_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> RetentionRun:
    """One retention run at time `now` (see the module docstring)."""
    run = RetentionRun()
    deadline = clock() + budget_seconds
    spans_before = now - max(settings.spans_days * DAY, RETENTION_FLOOR_SECONDS)
    results_before = now - max(settings.results_days * DAY, RETENTION_FLOOR_SECONDS)

    def out_of_time() -> bool:
        if clock() >= deadline:
            run.finished = False
        return not run.finished

    while not out_of_time():
        found = await store.prunable_threads(spans_before, THREADS_PER_BATCH)
        if not found:
            break
        parts: dict[str, tuple[int, bytes]] = {}
        for key, unassembled in found:
            if unassembled:  # its turns must outlive its spans
                parts.update(thread_from_stored(await store.load_thread(key))[1])
        run.deleted.update(await store.prune_spans([key for key, _ in found], parts, spans_before))
        await asyncio.sleep(0)  # let waiting work in between batches
    while not out_of_time():
        keys = await store.expired_threads(results_before, THREADS_PER_BATCH)
        if not keys:
            break
        run.deleted.update(await store.delete_threads(keys, results_before))
        await asyncio.sleep(0)
    for what, before in (
        ("outbox", now - settings.outbox_days * DAY),
        ("parked", results_before),
        ("review_items", now - settings.review_days * DAY),
        ("judge_cache", spans_before),
    ):
        while not out_of_time():
            n = await store.delete_old(what, before, ROWS_PER_BATCH)
            run.deleted[what] += n
            if n < ROWS_PER_BATCH:
                break
            await asyncio.sleep(0)
    while not out_of_time():
        pages = await store.reclaim(PAGES_PER_STEP)
        run.reclaimed_pages += pages
        if pages < PAGES_PER_STEP:
            break
        await asyncio.sleep(0)
    run.deleted = Counter({k: v for k, v in run.deleted.items() if v})
    return run
