"""The sink protocol and outbox delivery: at least once, with backoff, never lost."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from tracing_eval.assemble import TracePart, parts_from_stored, thread_from_parts
from tracing_eval.delivery import KINDS, REVIEW, BadPayload, Delivery, ResultDelivery, anchor, parse, turn_index
from tracing_eval.logging import redact_url_credentials
from tracing_eval.model import Thread
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
    """The sink refused the delivery for good (e.g. 400); retrying cannot help."""


class Sink(Protocol):
    """Where the outbox delivers: results, review items and retractions, at least once.

    `name` is the outbox's `sink` column; `kinds` the kinds the sink takes (`result`, `review`; a
    sink that takes results also gets the retraction of a result whose thread merged into
    another). `deliver` delivers one and raises on failure (`PermanentSinkError`: never retry);
    `deliver_batch` delivers several in one call, all or nothing (`batch` says whether the outbox
    should hand the sink whole batches of results and retractions, else it takes rows a few at a time
    and calls `deliver` for each; review items always go through `deliver`, one at a time); `aclose`
    releases the sink's connections. `BaseSink` has the defaults."""

    name: str
    kinds: frozenset[str]
    batch: bool

    async def deliver(self, delivery: Delivery) -> None: ...

    async def deliver_batch(self, deliveries: Sequence[Delivery]) -> None: ...

    async def aclose(self) -> None: ...


class BaseSink:
    """A `Sink` with the defaults: takes results and review items, one at a time (`deliver_batch`
    delivers them in turn), holds nothing to close. Subclasses set `name` and write `deliver`."""

    name: str
    kinds: frozenset[str] = frozenset(KINDS)
    batch: bool = False

    async def deliver(self, delivery: Delivery) -> None:
        raise NotImplementedError

    async def deliver_batch(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            await self.deliver(delivery)

    async def aclose(self) -> None:
        return None


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
    backoff. Each row becomes its typed delivery first (a payload that is not one is parked). A
    sink with `batch` set gets `limit` rows in one `deliver_batch` call, except review rows, which
    it gets one by one after the batch (`_split`); the others take
    ROW_BY_ROW_TAKE rows at a time and get them one by one, each marked done as soon as it went out
    (left unmarked while a later row is slow, it could outlive its lease and go out again from
    another replica). On PostgreSQL the rows taken are leased to
    this replica for `lease_seconds`, and each row's lease is renewed just before its delivery (a
    batch's rows together, in one transaction; a row whose lease ran out while it waited is left to the
    replica that took it over), so the lease must outlast one delivery, not a batch. Every attempt is counted in `telemetry` when given."""
    stats = DeliveryStats()
    started = time.monotonic()
    for sink in sinks:
        take = limit if sink.batch else min(limit, ROW_BY_ROW_TAKE)
        while True:
            rows = await store.pending_outbox(sink.name, now, take, lease_seconds)
            retried = stats.retried
            together, alone = _split(rows) if sink.batch else ([], rows)
            if together:  # the batch in one call, its leases renewed together just before
                at = now + time.monotonic() - started
                renewed = await store.renew_outbox_many(together, at, lease_seconds)
                stats.taken_over += sum(r is None for r in renewed)
                mine = await _typed(store, sink, [r for r in renewed if r is not None], at, stats, telemetry)
                if mine:
                    send = sink.deliver_batch([d for _, d in mine])
                    await _attempt(store, sink, mine, send, at, max_attempts, stats, telemetry)
            for row in alone:  # row by row, each renewed just before it goes out
                at = now + time.monotonic() - started  # `now` moved on while earlier rows went out
                if (taken := await _renew(store, row, at, lease_seconds, stats)) is not None:
                    for one in await _typed(store, sink, [taken], at, stats, telemetry):
                        await _attempt(store, sink, [one], sink.deliver(one[1]), at, max_attempts, stats, telemetry)
            if len(rows) < take or stats.retried > retried:  # the sink is down: try again next round
                break
    return stats


def _split(rows: list[OutboxRow]) -> tuple[list[OutboxRow], list[OutboxRow]]:
    """A batch sink's rows: those it takes together, and the review rows, which go out one by one
    after them. A result sent again by another replica after its batch outlived the lease lands
    on the same score; a review is routed in several requests, so it gets a lease of its own."""
    return [r for r in rows if r.kind != REVIEW], [r for r in rows if r.kind == REVIEW]


async def _typed(
    store: Store,
    sink: Sink,
    rows: list[OutboxRow],
    now: float,
    stats: DeliveryStats,
    telemetry: Telemetry | None,
) -> list[tuple[OutboxRow, Delivery]]:
    """The typed delivery of each row; a row whose payload is not one is parked with the reason.
    Results written before the typed contract get their anchors rebuilt first (`_reanchor`)."""
    typed: list[tuple[OutboxRow, Delivery]] = []
    for row in rows:
        try:
            typed.append((row, parse(row.kind, row.payload, row.id)))
        except BadPayload as exc:
            await _settle_failed(store, sink, row, str(exc), now, True, True, stats, telemetry)
    if any(isinstance(d, ResultDelivery) and d.legacy for _, d in typed):
        deliveries = await _reanchor(store, [d for _, d in typed])
        typed = [(row, d) for (row, _), d in zip(typed, deliveries, strict=True)]
    return typed


async def _reanchor(store: Store, deliveries: Sequence[Delivery]) -> list[Delivery]:
    """Results written before the typed contract with their anchors rebuilt from the thread as the
    store holds it now (one load for all their threads); the others as they are. A result whose
    thread is no longer in the store, or whose turn is gone, keeps the anchor it carries."""
    keys = sorted({d.thread_key for d in deliveries if isinstance(d, ResultDelivery) and d.legacy})
    stored = await store.load_threads(keys)
    rebuilt: dict[str, tuple[Thread, list[TracePart]]] = {}
    for key in keys:
        parts, _ = parts_from_stored(stored[key])
        if parts:
            rebuilt[key] = (thread_from_parts(key, parts), parts)
    out: list[Delivery] = []
    for d in deliveries:
        if isinstance(d, ResultDelivery) and d.legacy and d.thread_key in rebuilt:
            thread, parts = rebuilt[d.thread_key]
            index = turn_index(thread, d.target)
            if d.target == "thread" or (index is not None and index < len(thread.turns)):
                d = d.model_copy(update={"anchor": anchor(thread, index, parts)})
        out.append(d)
    return out


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
    rows: list[tuple[OutboxRow, Delivery]],
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
            for one in rows:
                await _attempt(store, sink, [one], sink.deliver(one[1]), now, max_attempts, stats, telemetry)
            return
        error = redact_url_credentials(f"{type(exc).__name__}: {exc}")  # stored in the outbox row
        for row, _ in rows:
            give_up = refused or row.attempts + 1 >= max_attempts
            await _settle_failed(store, sink, row, error, now, give_up, refused, stats, telemetry)
    else:
        await store.outbox_done([row.id for row, _ in rows], now)
        stats.delivered += len(rows)
        if telemetry is not None:
            for kind, n in Counter(row.kind for row, _ in rows).items():
                telemetry.delivery(sink.name, kind, "delivered", now, rows=n)


async def _settle_failed(
    store: Store,
    sink: Sink,
    row: OutboxRow,
    error: str,
    now: float,
    give_up: bool,
    refused: bool,
    stats: DeliveryStats,
    telemetry: Telemetry | None,
) -> None:
    """Record a failed delivery of `row`: retried with backoff, or parked (`give_up`)."""
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
