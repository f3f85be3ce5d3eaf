"""The sink protocol and outbox delivery: at least once, with backoff, never lost."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from tracing_eval.logging import redact_url_credentials
from tracing_eval.store.base import OutboxRow, Store

if TYPE_CHECKING:
    from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)

#: The store itself (results table and review queue); needs no outbox.
LOCAL = "local"
#: Rows taken at a time for a sink that takes them one by one: a replica that dies leaves no more
#: than this many waiting for their lease to run out.
ROW_BY_ROW_TAKE = 10


class PermanentSinkError(Exception):
    """The sink refused the payload for good (e.g. 400); retrying cannot help."""


class Sink(Protocol):
    name: str

    async def deliver(self, kind: str, payload: dict[str, Any]) -> None:
        """Deliver one outbox payload (`kind` is `result` or `review`); raise on failure. A sink may
        also have `deliver_batch(items)`, taking a list of `(kind, payload)` in one call (all or
        nothing); the outbox then hands it each batch of rows at once."""
        ...


@dataclass
class DeliveryStats:
    delivered: int = 0
    retried: int = 0
    failed: int = 0
    taken_over: int = 0  # rows another replica took over before this one got to them


def backoff_seconds(attempts: int, cap: float = 300.0) -> float:
    """1, 2, 4, ... seconds, capped."""
    return float(min(cap, 2 ** max(0, attempts)))


async def deliver_outbox(
    store: Store,
    sinks: list[Sink],
    now: float,
    max_attempts: int,
    limit: int = 100,
    *,
    lease_seconds: float = 300.0,
    telemetry: Telemetry | None = None,
) -> DeliveryStats:
    """Push every due outbox row to each sink until a batch is short or has a failure to retry: a
    failing sink gets no more batches this time, and its failed rows are retried on later rounds with
    backoff. A sink with `deliver_batch` gets `limit` rows in one call; the others take
    ROW_BY_ROW_TAKE rows at a time and get them one by one. On PostgreSQL the rows taken are leased to
    this replica for `lease_seconds`, and each row's lease is renewed just before its delivery (a
    batch's rows together, in one transaction; a row whose lease ran out while it waited is left to the
    replica that took it over), so the lease must outlast one delivery, not a batch. Every attempt is counted in `telemetry` when given."""
    stats = DeliveryStats()
    started = time.monotonic()
    for sink in sinks:
        batch = getattr(sink, "deliver_batch", None)
        take = limit if batch is not None else min(limit, ROW_BY_ROW_TAKE)
        while True:
            rows = await store.pending_outbox(sink.name, now, take, lease_seconds)
            retried = stats.retried
            if batch is not None:  # the whole batch in one call, its leases renewed together just before
                at = now + time.monotonic() - started
                renewed = await store.renew_outbox_many(rows, at, lease_seconds)
                stats.taken_over += sum(r is None for r in renewed)
                mine = [r for r in renewed if r is not None]
                if mine:
                    send = batch([(r.kind, r.payload) for r in mine])
                    await _attempt(store, sink, mine, send, at, max_attempts, stats, telemetry)
            else:  # row by row, each renewed just before it goes out
                for row in rows:
                    at = now + time.monotonic() - started  # `now` moved on while earlier rows went out
                    if (taken := await _renew(store, row, at, lease_seconds, stats)) is not None:
                        send = sink.deliver(taken.kind, taken.payload)
                        await _attempt(store, sink, [taken], send, at, max_attempts, stats, telemetry)
            if len(rows) < take or stats.retried > retried:  # the sink is down: try again next round
                break
    return stats


async def _renew(
    store: Store, row: OutboxRow, now: float, lease_seconds: float, stats: DeliveryStats
) -> OutboxRow | None:
    """The row with this replica's lease renewed, or None when another replica took it over (this
    batch waited longer than the lease)."""
    taken = await store.renew_outbox(row, now, lease_seconds)
    stats.taken_over += taken is None
    return taken


async def _attempt(
    store: Store,
    sink: Sink,
    rows: list[OutboxRow],
    send: Awaitable[None],
    now: float,
    max_attempts: int,
    stats: DeliveryStats,
    telemetry: Telemetry | None,
) -> None:
    """Await `send` (the delivery of `rows`) and settle the rows: done, or retried with backoff, or
    parked after `max_attempts` or a permanent refusal. A batch refused for good is tried again row
    by row, so that one bad row does not take the others down with it."""
    try:
        await send
    except Exception as exc:
        refused = isinstance(exc, PermanentSinkError)
        if refused and len(rows) > 1:
            for row in rows:
                send_one = sink.deliver(row.kind, row.payload)
                await _attempt(store, sink, [row], send_one, now, max_attempts, stats, telemetry)
            return
        error = redact_url_credentials(f"{type(exc).__name__}: {exc}")  # stored in the outbox row
        for row in rows:
            give_up = refused or row.attempts + 1 >= max_attempts
            await store.outbox_retry(row.id, error, now + backoff_seconds(row.attempts), give_up)
            log.warning(
                "sink delivery failed",
                sink=sink.name,
                outbox_id=row.id,
                kind=row.kind,
                attempts=row.attempts + 1,
                gave_up=give_up,
                error=error,
            )
            stats.failed += give_up
            stats.retried += not give_up
            if telemetry is not None:
                telemetry.delivery(sink.name, row.kind, "failed" if give_up else "retried", now, refused=refused)
    else:
        await store.outbox_done([row.id for row in rows], now)
        stats.delivered += len(rows)
        if telemetry is not None:
            for row in rows:
                telemetry.delivery(sink.name, row.kind, "delivered", now)
