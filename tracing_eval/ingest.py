"""Decoded OTLP data to an ingest batch, and storing it so that one bad span cannot hold up the rest.

`make_batch` finds each trace's conversation id on the way in. `store_isolating` writes a batch;
when the store refuses it for its data (`IngestRefused`: a value it cannot hold), the batch is split
until the spans and events at fault are found, and everything else is stored. A transient failure
(the store is down or busy) is raised as it is, for the caller to answer "retry later".
"""

from __future__ import annotations

from collections.abc import Iterable
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
