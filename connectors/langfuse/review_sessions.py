"""Sessions in the review annotation queue, read back as failed threads (`scenarios export --from langfuse`).

The queue is the one the sink routes to (`langfuse.review_queue`). For each SESSION item (or TRACE
item, for a thread without a session) the conversation is read like the source reads it (v4:
`/v2/observations` of the session; v3: `/sessions/{id}`, then `/traces/{id}`), and why it failed
comes from the scores tracing-eval wrote (`/v3/scores` of the session and of its traces, metadata
`passed: false`). A session the reviewer marked `false_alarm` is not a failure and is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from tracing_eval.assemble import thread_from_traces
from tracing_eval.connectors.langfuse.client import LangfuseClient
from tracing_eval.connectors.langfuse.configs import REVIEW_CONFIG
from tracing_eval.connectors.langfuse.mapping import (
    SOURCE,
    group_by_trace,
    parse_time,
    trace_info_v3,
    trace_info_v4,
    v3_trace_spans,
    v4_trace_spans,
)
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.connectors.langfuse.source import V4_FIELDS
from tracing_eval.failed_threads import Selection
from tracing_eval.identity import thread_key
from tracing_eval.model import MetricResult, Scope, Span, Status, Thread
from tracing_eval.scenarios import FailedThread, failing

#: How far before its queue item a conversation is looked for (v4 reads are bounded by time).
LOOKBACK = timedelta(days=30)
#: `--review-status` of the local queue, as Langfuse queue item statuses.
QUEUE_STATUS = {"open": "PENDING", "resolved": "COMPLETED"}


class ReviewQueueError(LookupError):
    """The review queue is not configured or does not exist."""


def result_of(score: Mapping[str, Any]) -> MetricResult | None:
    """A score tracing-eval wrote, as the result it came from (None for anyone else's score)."""
    meta = score.get("metadata") or {}
    if not isinstance(meta, dict) or meta.get("evaluator") != "tracing-eval" or not meta.get("metric"):
        return None
    evidence = meta.get("evidence")
    turn = meta.get("turn_index")
    value = meta.get("score", score.get("value"))
    return MetricResult(
        metric=str(meta["metric"]),
        metric_version=str(meta.get("metric_version") or "1"),
        scope=Scope(meta.get("scope") or ("thread" if turn is None else "turn")),
        turn_index=turn if isinstance(turn, int) else None,
        score=float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None,
        label=meta.get("label"),
        passed=meta.get("passed"),
        threshold=meta.get("threshold"),
        reason=str(score.get("comment") or ""),
        evidence=evidence if isinstance(evidence, dict) else {},
        status=Status.OK,
    )


def false_alarm(scores: list[dict[str, Any]]) -> bool:
    return any(s.get("name") == REVIEW_CONFIG and s.get("value") == "false_alarm" for s in scores)


class ReviewSessions:
    """Reads the sessions of the review queue; one per `scenarios export --from langfuse`."""

    def __init__(self, settings: LangfuseSettings, client: LangfuseClient | None = None) -> None:
        if not settings.review_queue:
            raise ReviewQueueError("no review queue configured (langfuse.review_queue is empty)")
        self.settings = settings
        self.client = client or LangfuseClient(settings)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _queue_id(self) -> str:
        named = [q for q in await self.client.queues() if q.get("name") == self.settings.review_queue]
        if not named:
            raise ReviewQueueError(
                f"Langfuse has no annotation queue named {self.settings.review_queue!r} (langfuse.review_queue); "
                "the sink creates it when it first routes a thread"
            )
        return str(min(named, key=lambda q: (str(q.get("createdAt") or ""), str(q["id"])))["id"])

    async def failed_threads(self, selection: Selection) -> list[FailedThread]:
        """Failed threads of the queue's items (newest first), filtered by status, time, metric and label."""
        status = QUEUE_STATUS.get(selection.review_status or "", None)
        queue_id = await self._queue_id()
        items = await self.client.queue_items(queue_id, status)
        items.sort(key=lambda i: str(i.get("createdAt") or ""), reverse=True)
        out: list[FailedThread] = []
        seen: set[tuple[str, str]] = set()
        for item in items:
            kind, object_id = str(item.get("objectType")), str(item.get("objectId"))
            created = parse_time(item.get("createdAt")) or datetime.now(UTC)
            if kind not in ("SESSION", "TRACE") or (kind, object_id) in seen:
                continue
            if not selection.in_time(created.timestamp()):
                continue
            seen.add((kind, object_id))
            found = await self._failed(kind, object_id, created, selection)
            if found is not None:
                found.origin.update(
                    {"origin": "langfuse", "queue_item": str(item.get("id")), "status": item.get("status")}
                )
                out.append(found)
            if selection.limit is not None and len(out) >= selection.limit:
                break
        return out

    async def _failed(self, kind: str, object_id: str, created: datetime, selection: Selection) -> FailedThread | None:
        thread = await self._thread(kind, object_id, created)
        if thread is None or not thread.turns:
            return None
        subject = {"sessionId": object_id} if kind == "SESSION" else {"traceId": object_id}
        scores = await self.client.scores(subject)
        if false_alarm(scores):
            return None
        if kind == "SESSION":
            for turn in thread.turns:
                if turn.trace_id:
                    scores += await self.client.scores({"traceId": turn.trace_id})
        results = [r for r in map(result_of, scores) if r is not None]
        failures = failing(results, selection.metrics, selection.labels)
        return FailedThread(thread, failures, results) if failures else None

    async def _thread(self, kind: str, object_id: str, created: datetime) -> Thread | None:
        session = object_id if kind == "SESSION" else None
        key = thread_key(SOURCE, session, object_id)
        if await self.client.generation() == "v4":
            traces = await self._v4_traces(kind, object_id, created)
        else:
            traces = await self._v3_traces(kind, object_id)
        return thread_from_traces(key, traces, source=SOURCE) if traces else None

    async def _v4_traces(self, kind: str, object_id: str, created: datetime) -> list[list[Span]]:
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page, cursor = await self.client.observations(
                start=created - LOOKBACK,
                end=datetime.now(UTC) + timedelta(minutes=1),
                fields=V4_FIELDS,
                limit=self.settings.page_size,
                cursor=cursor,
                session_id=object_id if kind == "SESSION" else None,
                trace_id=object_id if kind == "TRACE" else None,
            )
            rows += page
            if not cursor or not page:
                break
        traces = []
        for trace_rows in group_by_trace(rows).values():
            info = trace_info_v4(trace_rows, self.settings.self_marker)
            if not info.self_traffic:
                traces.append(v4_trace_spans(trace_rows, info))
        return traces

    async def _v3_traces(self, kind: str, object_id: str) -> list[list[Span]]:
        if kind == "SESSION":
            session = await self.client.session(object_id)
            ids = [str(t["id"]) for t in (session or {}).get("traces") or []]
        else:
            ids = [object_id]
        traces = []
        for trace_id in ids:
            detail = await self.client.trace(trace_id)
            if detail is None:
                continue
            info = trace_info_v3(detail, self.settings.self_marker)
            if not info.self_traffic:
                traces.append(v3_trace_spans(detail, info))
        return traces
