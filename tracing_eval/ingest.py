"""Decoded OTLP data to an ingest batch: find each trace's conversation id on the way in."""

from __future__ import annotations

from collections.abc import Iterable

from tracing_eval import conventions
from tracing_eval.model import Span, SpanEvent
from tracing_eval.store.base import IngestBatch


def conversation_ids(spans: Iterable[Span]) -> dict[str, str]:
    """trace id -> conversation id, preferring the root span's id when spans disagree."""
    found: dict[str, tuple[bool, str]] = {}
    for s in spans:
        conv = conventions.thread_id(s)
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
