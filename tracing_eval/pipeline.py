"""One tick: pull sources, claim ready threads, evaluate, record, deliver."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import structlog

from tracing_eval.assemble import TracePart, parts_from_stored, thread_from_parts
from tracing_eval.config import Settings
from tracing_eval.delivery import KINDS, Anchors, anchor
from tracing_eval.evaluate import evaluate_all
from tracing_eval.judge import JudgeClient, ThreadJudge
from tracing_eval.metrics.catalogue import MetricSet
from tracing_eval.model import MetricResult, Thread, result_id
from tracing_eval.retention import RetentionRun, retain
from tracing_eval.routing import route
from tracing_eval.sinks import LOCAL, DeliveryStats, Sink, backoff_seconds, deliver_outbox
from tracing_eval.sources import Source, SourceStore
from tracing_eval.store.base import (
    Claim,
    Evaluated,
    IngestBatch,
    IngestStats,
    Mode,
    Outgoing,
    Readiness,
    ReviewRequest,
    Store,
    StoredThread,
)
from tracing_eval.telemetry import Telemetry
from tracing_eval.unreadable import UnreadableReport

log = structlog.get_logger(__name__)

SETTLED = Readiness(turn_settle=0.0, thread_idle=0.0)


@dataclass
class TickStats:
    spans_pulled: int = 0
    threads_evaluated: int = 0
    turn_evaluations: int = 0
    results: int = 0
    routed_to_review: int = 0
    errors: int = 0
    lost_leases: int = 0
    delivery: DeliveryStats = field(default_factory=DeliveryStats)
    #: the tick's time ran out after a full batch: more threads may be ready now
    more: bool = False


@dataclass
class _Done:
    """An evaluation waiting to be recorded, with what its log line reports."""

    evaluated: Evaluated
    thread: Thread
    judge: ThreadJudge | None


@dataclass
class Pipeline:
    store: Store
    settings: Settings
    metrics: MetricSet
    owner: str
    sources: Sequence[Source] = ()
    sinks: Sequence[Sink] = ()
    judge: JudgeClient | None = None
    telemetry: Telemetry | None = None
    unreadable: UnreadableReport = field(default_factory=UnreadableReport)
    clock: Callable[[], float] = time.time

    @property
    def readiness(self) -> Readiness:
        s = self.settings.schedule
        return Readiness(turn_settle=s.turn_settle_seconds, thread_idle=s.thread_idle_seconds)

    async def tick(self, *, settle_all: bool = False, deliver: bool = True) -> TickStats:
        """Pull, claim, evaluate and record, then (with `deliver`) deliver the outbox. Claims go on batch
        after batch while full batches are ready, for up to `tick_seconds` (a backlog drains without
        waiting for the next tick; `TickStats.more` says the time ran out first). With `settle_all`,
        every turn and thread counts as ready, and claims go on until none is left. The long-running
        worker delivers on a schedule of its own, so deliveries and evaluations do not wait for each
        other."""
        started = time.perf_counter()
        stats = TickStats()
        for source in self.sources:
            store: SourceStore = (
                self.store if self.telemetry is None else CountingStore(self.store, self.telemetry, source.name)
            )
            try:
                stats.spans_pulled += await source.pull(store, self.clock())
            except Exception as exc:  # one broken source must not stop the others
                stats.errors += 1
                if self.telemetry is not None:
                    self.telemetry.source_errors.labels(source.name).inc()
                log.error("source pull failed", source=source.name, error=f"{type(exc).__name__}: {exc}")
        ready = SETTLED if settle_all else self.readiness
        schedule = self.settings.schedule
        until = time.monotonic() + schedule.tick_seconds
        while True:  # a full batch means more may be ready: claim again, for up to one tick interval
            claims = await self.store.claim(
                self.owner, self.clock(), ready, schedule.batch_size, schedule.lease_seconds
            )
            await self._evaluate_all(claims, stats)
            full = len(claims) >= schedule.batch_size
            if not claims or (not settle_all and (not full or time.monotonic() >= until)):
                stats.more = full
                break
        if deliver:
            stats.delivery = await self.deliver()
        if self.telemetry is not None:
            self.telemetry.tick_done(time.perf_counter() - started, self.clock())
        return stats

    async def _evaluate_all(self, claims: list[Claim], stats: TickStats) -> None:
        """Evaluate claimed threads. With a judge, several at once so judge calls overlap, each recorded
        as soon as it is done; without one, one after another, recorded together in one commit."""
        if self.judge is None:
            try:
                loaded = await self.store.load_threads([c.thread_key for c in claims]) if claims else {}
            except Exception as exc:  # the store failed: every claim is retried later
                await self._failed(claims, exc, stats)
                return
            done = []
            for claim in claims:
                evaluated = await self._evaluate(claim, stats, loaded[claim.thread_key])
                if evaluated is not None:
                    done.append(evaluated)
                await asyncio.sleep(0)  # the receiver and /healthz are served between threads
            await self._record(done, stats)
            return
        gate = asyncio.Semaphore(self.settings.judge.max_concurrency)

        async def one(claim: Claim) -> None:
            async with gate:
                await self.evaluate_claim(claim, stats)

        await asyncio.gather(*(one(c) for c in claims))

    async def close(self) -> None:
        """Close the connections of sinks, sources and the judge, each once; one that fails to close
        is logged and the others are still closed."""
        parts: list[Sink | Source] = [*self.sinks, *self.sources]
        for part in parts:
            try:
                await part.aclose()
            except Exception as exc:
                log.warning("closing failed", part=type(part).__name__, error=f"{type(exc).__name__}: {exc}")
        if self.judge is not None:
            await self.judge.close()

    async def deliver(self) -> DeliveryStats:
        sinks = self.settings.sinks
        return await deliver_outbox(
            self.store,
            list(self.sinks),
            self.clock(),
            sinks.max_attempts,
            sinks.batch_size,
            lease_seconds=sinks.lease_seconds,
            telemetry=self.telemetry,
        )

    async def retain(self) -> RetentionRun:
        """One retention run (see `tracing_eval.retention`), counted in the telemetry."""
        run = await retain(self.store, self.settings.retention, self.clock())
        if self.telemetry is not None:
            self.telemetry.retained(run.deleted, run.finished)
        if run.deleted or run.reclaimed_pages:
            log.info("retention", deleted=dict(run.deleted), reclaimed_pages=run.reclaimed_pages, finished=run.finished)
        return run

    def observe_memory(self) -> None:
        """Refresh the gauges kept in memory: the sinks' failing time and the judge's concurrency cap.
        Synchronous, so a caller that renders the exposition right after it (with no `await` between)
        serves a failing time that agrees with the error counters of the same text."""
        if self.telemetry is None:
            return
        self.telemetry.sinks_state(self.clock(), self.outbox_sinks)
        if self.judge is not None:
            self.telemetry.judge_concurrency_limit.set(self.judge.limiter.limit)

    async def observe_store(self) -> None:
        """Refresh the telemetry gauges read from the store: outbox backlog and age and threads ready,
        and the store's size. Raises when the store cannot be read, after setting
        `tracing_eval_store_up` to 0."""
        if self.telemetry is None:
            return
        now = self.clock()
        try:
            outbox = await self.store.outbox_stats(now)
            ready = await self.store.threads_ready(now, self.readiness)
            size = await self.store.size()
        except Exception:
            self.telemetry.store_up.set(0)
            raise
        self.telemetry.store_state(now, outbox, ready, self.outbox_sinks, size)

    @property
    def outbox_sinks(self) -> dict[str, list[str]]:
        """The sinks delivered through the outbox, with the payload kinds each takes."""
        return {s.name: [k for k in KINDS if k in s.kinds] for s in self.sinks if s.name != LOCAL}

    def _sinks_for(self, kind: str) -> list[str]:
        """Outbox sinks that take `kind` deliveries."""
        return [s.name for s in self.sinks if s.name != LOCAL and kind in s.kinds]

    def _review(self, thread: Thread, results: list[MetricResult], traces: list[TracePart]) -> ReviewRequest | None:
        decision = route(results, self.settings.review, review_sinks=self._sinks_for("review"))
        if decision is None:
            return None
        return ReviewRequest(
            decision.reasons, decision.sinks, decision.local, decision.payload_fields(), anchor(thread, None, traces)
        )

    async def evaluate_claim(self, claim: Claim, stats: TickStats) -> None:
        """Evaluate one claimed thread and record its results."""
        evaluated = await self._evaluate(claim, stats)
        if evaluated is not None:
            await self._record([evaluated], stats)

    async def _evaluate(self, claim: Claim, stats: TickStats, stored: StoredThread | None = None) -> _Done | None:
        """Assemble and evaluate a claimed thread (loaded unless `stored` is given); None (and the
        claim released for a retry) when that fails."""
        try:
            stored = stored if stored is not None else await self.store.load_thread(claim.thread_key)
            traces, parts = parts_from_stored(stored)
            thread = thread_from_parts(stored.key, traces, version=claim.version)
            self.unreadable.observe(thread, self.telemetry)
            reuse: dict[tuple[str, str], MetricResult] = {}
            if self.judge is not None:  # only judged results are reused (by what they looked at)
                earlier = await self.store.results(claim.thread_key)
                reuse = {(s.result.metric, s.result.input_hash): s.result for s in earlier if s.result.input_hash}
            turns_only = claim.mode is Mode.TURNS
            judge = self._judge_for(thread.key)
            results = (
                await evaluate_all(
                    thread,
                    self.metrics,
                    judge,
                    reuse,
                    turns_only=turns_only,
                    from_turn=first_changed_turn(thread, stored.traces) if turns_only else 0,
                )
                if thread.turns
                else []
            )
            review = self._review(thread, results, traces) if claim.mode is Mode.THREAD else None
            anchors = Anchors(thread, traces)
            outgoing = [outgoing_result(thread, r, traces, anchors) for r in results]
        except Exception as exc:  # keep every other thread going; retry this one later
            await self._failed([claim], exc, stats)
            return None
        return _Done(Evaluated(claim, outgoing, review, parts), thread, judge)

    async def _record(self, done: list[_Done], stats: TickStats) -> None:
        """Record evaluations in one transaction; a claim whose lease was lost is counted and skipped."""
        if not done:
            return
        try:
            recorded = await self.store.record_many(
                [d.evaluated for d in done], self._sinks_for("result"), self.clock()
            )
        except Exception as exc:
            await self._failed([d.evaluated.claim for d in done], exc, stats)
            return
        for one, ok in zip(done, recorded, strict=True):
            self._recorded(one, ok, stats)

    async def _failed(self, claims: list[Claim], exc: Exception, stats: TickStats) -> None:
        for claim in claims:
            stats.errors += 1
            give_up = claim.attempts >= self.settings.schedule.max_attempts
            await self.store.release(
                claim, f"{type(exc).__name__}: {exc}", self.clock(), backoff_seconds(claim.attempts), give_up
            )
            log.error(
                "thread evaluation failed",
                thread_key=claim.thread_key,
                version=claim.version,
                mode=claim.mode.value,
                attempts=claim.attempts,
                gave_up=give_up,
                exc_info=exc,
            )
            if self.telemetry is not None:
                self.telemetry.evaluation_errors.labels(str(give_up).lower()).inc()

    def _recorded(self, done: _Done, ok: bool, stats: TickStats) -> None:
        evaluated, thread, judge = done.evaluated, done.thread, done.judge
        claim = evaluated.claim
        bound = log.bind(thread_key=claim.thread_key, version=claim.version, mode=claim.mode.value)
        if not ok:
            stats.lost_leases += 1
            if self.telemetry is not None:
                self.telemetry.lost_leases.inc()
            bound.warning("lease lost before results were recorded; another worker owns the thread")
            return
        results = [o.result for o in evaluated.outgoing]
        stats.results += len(results)
        if claim.mode is Mode.THREAD:
            stats.threads_evaluated += 1
            stats.routed_to_review += evaluated.review is not None
        else:
            stats.turn_evaluations += 1
        if self.telemetry is not None:
            self.telemetry.evaluated(claim.mode.value, results)
        spent = judge.usage if judge else None
        bound.info(
            "evaluated",
            turns=len(thread.turns),
            results=len(results),
            review=evaluated.review is not None,
            judge_calls=spent.calls if spent else 0,
            judge_tokens=spent.input_tokens + spent.output_tokens if spent else 0,
            judge_cost_usd=round(spent.cost_usd, 6) if spent else 0.0,
        )

    def _judge_for(self, thread_key: str) -> ThreadJudge | None:
        """The judge with this thread's token budget, when the judge tier is on."""
        return self.judge.for_thread(thread_key) if self.judge else None


def first_changed_turn(thread: Thread, assembled: Collection[str]) -> int:
    """The index of the first turn whose trace was assembled for this evaluation (`assembled`: trace
    ids). The turns before it are as they were when their results were recorded: a turn's part is
    stored with its results, in one transaction, and is assembled again only when its trace changed.
    A per-turn result reads its turn and the turns before it, so those results stand; 0 (every turn)
    when no turn was assembled or a turn has no trace id."""
    if any(t.trace_id is None for t in thread.turns):
        return 0
    return min((t.index for t in thread.turns if t.trace_id in assembled), default=0)


def outgoing_result(
    thread: Thread, r: MetricResult, traces: list[TracePart], anchors: Anchors | None = None
) -> Outgoing:
    """A result of `thread` ready to be recorded: its deterministic id, target and anchor (from the
    thread's traces as assembled for this evaluation; `anchors`: those of this thread built so far).
    `Outgoing.delivery` makes it what sinks get."""
    target = r.target(thread)
    where = (anchors or Anchors(thread, traces)).of(r.turn_index)
    return Outgoing(result_id(thread.key, target, r.metric), target, r, where)


class CountingStore:
    """The store as a pull source sees it (`SourceStore`): what the source ingests is also counted in
    the telemetry."""

    def __init__(self, store: Store, telemetry: Telemetry, source: str) -> None:
        self._store = store
        self._telemetry = telemetry
        self._source = source

    async def get_source_state(self, name: str) -> str | None:
        return await self._store.get_source_state(name)

    async def ingest(self, batch: IngestBatch, now: float) -> IngestStats:
        stats = await self._store.ingest(batch, now)
        self._telemetry.received(self._source, stats.spans, stats.events, stats.threads_changed)
        return stats
