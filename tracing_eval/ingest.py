"""Decoded OTLP data to an ingest batch, and storing it so that one bad span cannot hold up the rest.

`make_batch` finds each trace's conversation id on the way in. `store_isolating` writes a batch;
when the store refuses it for its data (`IngestRefused`: a value it cannot hold), the batch is split
until the spans and events at fault are found, and everything else is stored. A transient failure
(the store is down or busy) is raised as it is, for the caller to answer "retry later".
`GroupWriter` writes the batches of concurrent requests: side by side, or (group commit) those that
wait for the store together, in one transaction.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tracing_eval import conventions
from tracing_eval.model import Span, SpanEvent
from tracing_eval.sources import SourceStore
from tracing_eval.store.base import IngestBatch, IngestRefused, IngestStats


def conversation_ids(spans: Iterable[Span]) -> dict[str, str]:
    """trace id -> conversation id, preferring the root span's id when spans disagree. NUL characters
    are dropped (no database text type holds them); an id of nothing else is no id."""
    found: dict[str, tuple[bool, str]] = {}
    for s in spans:
        conv = conventions.thread_id(s)
        if conv and "\0" in conv:
            conv = conv.replace("\0", "")
        if not conv:
            continue
        is_root = s.parent_id is None
        if s.trace_id not in found or (is_root and not found[s.trace_id][0]):
            found[s.trace_id] = (is_root, conv)
    return {tid: conv for tid, (_, conv) in found.items()}


#: Events the worker itself emits; one that loops back into a receiver must not change the thread.
OWN_EVENTS = frozenset({"gen_ai.evaluation.result"})


def make_batch(
    spans: list[Span],
    events: list[tuple[str, str, SpanEvent]],
    *,
    source: str = "otlp",
    source_state: dict[str, str] | None = None,
) -> IngestBatch:
    return IngestBatch(
        spans=spans,
        events=[e for e in events if e[2].name not in OWN_EVENTS],
        conversations=conversation_ids(spans),
        source=source,
        source_state=source_state or {},
    )


@dataclass
class Stored:
    """What `store_isolating` wrote, and what the store refused (each with the reason)."""

    stats: IngestStats = field(default_factory=IngestStats)
    refused_spans: int = 0
    refused_events: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, stats: IngestStats) -> None:
        self.stats.spans += stats.spans
        self.stats.events += stats.events
        self.stats.threads_changed += stats.threads_changed


async def store_isolating(store: SourceStore, batch: IngestBatch, now: float) -> Stored:
    """Ingest `batch`; spans and events the store refuses for their data are left out and reported
    (found by halving the batch: about 2·log2(n) more transactions per bad item). Source progress is
    written last, once everything storable is stored. Transient store errors propagate."""
    out = Stored()
    try:
        out.add(await store.ingest(batch, now))
        return out
    except IngestRefused as exc:
        await _isolate(store, replace(batch, source_state={}), now, out, exc)
    if batch.source_state:
        out.add(await store.ingest(IngestBatch(source=batch.source, source_state=batch.source_state), now))
    return out


async def _isolate(store: SourceStore, batch: IngestBatch, now: float, out: Stored, refused: IngestRefused) -> None:
    """`batch` was refused: report it if it is one item, else store each half or isolate within it."""
    if len(batch.spans) + len(batch.events) <= 1:
        _report(batch, out, refused.detail)
        return
    if len(batch.spans) > 1:
        half = (len(batch.spans) + 1) // 2
        parts = [replace(batch, spans=batch.spans[:half], events=[]), replace(batch, spans=batch.spans[half:])]
    elif batch.spans:  # one span and its events
        parts = [replace(batch, events=[]), replace(batch, spans=[])]
    else:
        half = (len(batch.events) + 1) // 2
        parts = [replace(batch, events=batch.events[:half]), replace(batch, events=batch.events[half:])]
    for part in parts:
        if not part.spans and not part.events:
            continue
        try:
            out.add(await store.ingest(part, now))
        except IngestRefused as exc:
            await _isolate(store, part, now, out, exc)


def _report(batch: IngestBatch, out: Stored, detail: str) -> None:
    if batch.spans:
        s = batch.spans[0]
        out.refused_spans += 1
        out.errors.append(f"span {s.name[:80]!r} ({s.trace_id}/{s.span_id}): the store refused it: {detail}")
    elif batch.events:
        trace_id, span_id, ev = batch.events[0]
        out.refused_events += 1
        out.errors.append(f"log record {ev.name[:80]!r} ({trace_id}/{span_id}): the store refused it: {detail}")


#: At most this many spans and events of waiting requests go into one transaction together
GROUP_ITEMS = 8192


@dataclass
class _Waiting:
    batch: IngestBatch
    taken: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Future[Stored] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class GroupWriter:
    """Writes the batches of concurrent requests, at most `writers` transactions at once. With
    `together` (group commit), a transaction takes every batch waiting when it starts (up to
    `GROUP_ITEMS` spans and events) and writes them as one batch: one commit and one fsync for all
    of them; else each transaction writes one batch. A caller gets its result once its transaction
    committed, as if it had written alone. When the store refuses a group for its data, each batch of
    it is written alone with `store_isolating`, so only the request at fault has spans rejected."""

    def __init__(self, store: SourceStore, writers: int, clock: Callable[[], float], *, together: bool) -> None:
        self.store = store
        self.writers = writers
        self.together = together
        self.clock = clock
        self._busy = 0
        self._waiting: deque[_Waiting] = deque()
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, batch: IngestBatch, timeout: float) -> Stored:
        """Store `batch` as `store_isolating` does. Raises `TimeoutError` when no transaction took it
        within `timeout` seconds (it is then not written); transient store errors propagate."""
        item = _Waiting(batch)
        item.done.add_done_callback(_retrieved)  # a caller that gave up leaves no unretrieved error
        self._waiting.append(item)
        if self._busy < self.writers:
            self._busy += 1
            task = asyncio.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            await asyncio.wait_for(item.taken.wait(), timeout)
        except TimeoutError:
            if not item.taken.is_set():  # not taken: it must not be written later
                self._waiting.remove(item)
                raise
        except asyncio.CancelledError:
            if not item.taken.is_set():
                self._waiting.remove(item)
            raise
        return await asyncio.shield(item.done)

    async def _drain(self) -> None:
        group: list[_Waiting] = []
        try:
            while self._waiting:
                group = self._take()
                await self._write(group)
        finally:
            self._busy -= 1
            for item in group:  # stopped mid-write (cancelled): no caller waits forever
                _settle(item.done, ConnectionError("the store writer stopped"))

    def _take(self) -> list[_Waiting]:
        """The next group: the oldest waiting batch and, `together`, those after it that fit in
        `GROUP_ITEMS`."""
        group = [self._waiting.popleft()]
        size = len(group[0].batch.spans) + len(group[0].batch.events)
        while self.together and self._waiting and _joins(self._waiting[0].batch, group[0].batch):
            more = len(self._waiting[0].batch.spans) + len(self._waiting[0].batch.events)
            if size + more > GROUP_ITEMS:
                break
            group.append(self._waiting.popleft())
            size += more
        for item in group:
            item.taken.set()
        return group

    async def _write(self, group: list[_Waiting]) -> None:
        now = self.clock()
        if len(group) > 1:
            try:
                stats = await self.store.ingest(merged([item.batch for item in group]), now)
            except IngestRefused:
                pass  # each batch alone below: only the one at fault has spans rejected
            except Exception as exc:
                for item in group:
                    _settle(item.done, exc)
                return
            else:
                for k, item in enumerate(group):
                    _settle(item.done, _share(item.batch, stats if k == 0 else None))
                return
        for item in group:
            try:
                _settle(item.done, await store_isolating(self.store, item.batch, now))
            except Exception as exc:
                _settle(item.done, exc)


def _joins(batch: IngestBatch, first: IngestBatch) -> bool:
    """Whether `batch` may be written in one transaction with `first`: the same source, and no source
    progress (a pulled batch's progress is written only once its own data is)."""
    return batch.source == first.source and not batch.source_state and not first.source_state


def merged(batches: list[IngestBatch]) -> IngestBatch:
    """One batch of `batches`, which stores what writing them one after the other would: a span sent
    twice keeps its last copy, and a trace keeps the first conversation id it was given."""
    conversations: dict[str, str] = {}
    for batch in batches:
        for trace_id, conv in batch.conversations.items():
            conversations.setdefault(trace_id, conv)
    return IngestBatch(
        spans=[s for b in batches for s in b.spans],
        events=[e for b in batches for e in b.events],
        conversations=conversations,
        source=batches[0].source,
    )


def _share(batch: IngestBatch, group: IngestStats | None) -> Stored:
    """A batch's part of its group's stats: its own spans (each once) and events; the threads the
    group changed are counted with its first batch only, so the sum over the group is the group's."""
    spans = len({(s.trace_id, s.span_id) for s in batch.spans})
    return Stored(
        IngestStats(spans=spans, events=len(batch.events), threads_changed=group.threads_changed if group else 0)
    )


def _settle(done: asyncio.Future[Stored], outcome: Stored | Exception) -> None:
    if done.done():
        return
    if isinstance(outcome, Exception):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


def _retrieved(done: asyncio.Future[Stored]) -> None:
    if not done.cancelled():
        done.exception()
