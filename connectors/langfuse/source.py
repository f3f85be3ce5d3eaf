"""The Langfuse source: pull observations into the store, window by window, behind a watermark.

Every read is bounded by time: `[watermark - overlap, now)` (first pull: from `since`), split
into windows of at most `window_seconds`; each window is committed as one ingest batch together
with the new watermark, so a crash repeats at most one window. Rows re-read in the overlap are
skipped unless they changed (a fingerprint per observation read in the last overlap window is
kept in the source state), so re-reading never bumps a thread's version by itself.

v4 (and Cloud): `GET /v2/observations` by cursor with field groups, through the SDK.
v3: `GET /traces` by page (oldest first), then `GET /traces/{id}` for each new or changed trace.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import structlog

from tracing_eval.connectors.langfuse.client import LangfuseClient
from tracing_eval.connectors.langfuse.mapping import (
    SOURCE,
    ReadFilter,
    fingerprint,
    group_by_trace,
    parse_time,
    to_ns,
    trace_info_v3,
    trace_info_v4,
    v3_trace_spans,
    v4_trace_spans,
)
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.conventions.values import dumps
from tracing_eval.ingest import make_batch
from tracing_eval.model import Span
from tracing_eval.sources import PullSource, SourceStore

log = structlog.get_logger(__name__)

#: Field groups read from /v2/observations (see reference/langfuse.md §3.1).
V4_FIELDS = "core,basic,io,metadata,model,usage,trace_context"
V3_TRACE_FIELDS = "core,io,observations,metrics"
_V3_LIST_KEYS = (
    *("timestamp", "name", "sessionId", "userId", "tags", "environment", "release", "version"),
    *("input", "output", "metadata", "observations", "latency", "totalCost"),
)
_DETAIL_CONCURRENCY = 4


@dataclass
class SourceState:
    """What the source remembers between pulls (stored as JSON with the data it describes)."""

    watermark: datetime | None = None
    seen: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (fingerprint, start seconds)

    @classmethod
    def loads(cls, raw: str | None) -> SourceState:
        if not raw:
            return cls()
        data = orjson.loads(raw)
        seen = {k: (str(v[0]), int(v[1])) for k, v in (data.get("seen") or {}).items()}
        return cls(parse_time(data.get("watermark")), seen)

    def dumps(self) -> str:
        watermark = self.watermark.isoformat() if self.watermark else None
        return orjson.dumps({"v": 1, "watermark": watermark, "seen": self.seen}).decode()

    def changed(self, key: str, digest: str, start_ns: int) -> bool:
        """True (and remembered) when `key` is new or its digest differs from the last read."""
        if self.seen.get(key, ("", 0))[0] == digest:
            return False
        self.seen[key] = (digest, start_ns // 1_000_000_000)
        return True

    def forget_before(self, moment: datetime) -> None:
        """Drop fingerprints of rows that no later read can return again."""
        cutoff = int(moment.timestamp())
        self.seen = {k: v for k, v in self.seen.items() if v[1] >= cutoff}


class LangfuseSource(PullSource):
    """`Source` over one Langfuse project; `backfill_since` re-reads from that time on the first pull."""

    name = SOURCE

    def __init__(
        self,
        settings: LangfuseSettings,
        *,
        client: LangfuseClient | None = None,
        backfill_since: datetime | None = None,
    ) -> None:
        self.settings = settings
        self.client = client or LangfuseClient(settings)
        self.filter = ReadFilter.from_settings(settings)
        self.state_key = f"langfuse:{settings.host}:{self.client.public_key}"
        self._backfill_since = backfill_since

    async def aclose(self) -> None:
        await self.client.aclose()

    async def catch_up(self, store: SourceStore, progress: Callable[[datetime | None, int], None]) -> int:
        """Pull until the watermark reaches the time of the pull (a backfill spans many pulls of
        `max_windows_per_pull` windows); `progress(watermark, spans so far)` after each pull."""
        spans = 0
        while True:
            pulled_at = time.time()
            spans += await self.pull(store, pulled_at)
            watermark = SourceState.loads(await store.get_source_state(self.state_key)).watermark
            progress(watermark, spans)
            if watermark is None or watermark.timestamp() >= pulled_at - 1:
                return spans

    async def pull(self, store: SourceStore, now: float) -> int:
        """Read every window from the watermark (minus the overlap) to now; return spans stored."""
        generation = await self.client.generation()
        state = SourceState.loads(await store.get_source_state(self.state_key))
        until = datetime.fromtimestamp(now, UTC)
        overlap = timedelta(seconds=self.settings.overlap_seconds)
        if self._backfill_since is not None:
            start = self._backfill_since
        elif state.watermark is not None:
            start = state.watermark - overlap
        else:
            start = self.settings.since_time(until)
        read = self._read_v4 if generation == "v4" else self._read_v3
        stored = 0
        for _ in range(self.settings.max_windows_per_pull):
            if start >= until:
                break
            end = min(start + timedelta(seconds=self.settings.window_seconds), until)
            spans = await read(start, end, state)
            state.watermark = end
            state.forget_before(end - overlap)
            batch = make_batch(spans, [], source=SOURCE, source_state={self.state_key: state.dumps()})
            await store.ingest(batch, now)
            self._backfill_since = None
            stored += len(spans)
            (log.info if spans else log.debug)(
                "langfuse window read", read=generation, start=start.isoformat(), end=end.isoformat(), spans=len(spans)
            )
            start = end
        return stored

    # -- v4 --------------------------------------------------------------------------------

    async def _read_v4(self, start: datetime, end: datetime, state: SourceState) -> list[Span]:
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page, cursor = await self.client.observations(
                start=start,
                end=end,
                fields=V4_FIELDS,
                limit=self.settings.page_size,
                environment=self.settings.environments,
                cursor=cursor,
            )
            rows += page
            if not cursor or not page:
                break
        spans: list[Span] = []
        for trace_rows in group_by_trace(rows).values():
            info = trace_info_v4(trace_rows, self.settings.self_marker)
            if self.filter.keep(info):
                spans += [
                    s for s in v4_trace_spans(trace_rows, info) if state.changed(s.span_id, fingerprint(s), s.start_ns)
                ]
        return spans

    # -- v3 --------------------------------------------------------------------------------

    def _v3_params(self) -> list[tuple[str, Any]]:
        params: list[tuple[str, Any]] = [("fields", V3_TRACE_FIELDS)]
        params += [("environment", e) for e in self.settings.environments]
        params += [("tags", t) for t in self.settings.tags]
        if len(self.settings.trace_names) == 1:
            params.append(("name", self.settings.trace_names[0]))
        return params

    async def _read_v3(self, start: datetime, end: datetime, state: SourceState) -> list[Span]:
        listed: list[dict[str, Any]] = []
        page = 1
        while True:
            data, total = await self.client.traces(
                start=start, end=end, page=page, limit=self.settings.page_size, params=self._v3_params()
            )
            listed += data
            if not data or (isinstance(total, int) and page >= total):
                break
            page += 1
        todo = []
        for trace in listed:
            info = trace_info_v3(trace, self.settings.self_marker)
            digest = hashlib.blake2b(
                dumps({k: trace.get(k) for k in _V3_LIST_KEYS}).encode(), digest_size=8
            ).hexdigest()
            if self.filter.keep(info) and state.changed(
                "trace:" + info.trace_id, digest, to_ns(trace.get("timestamp"))
            ):
                todo.append(info.trace_id)
        limit = asyncio.Semaphore(_DETAIL_CONCURRENCY)

        async def detail(trace_id: str) -> dict[str, Any] | None:
            async with limit:
                return await self.client.trace(trace_id)

        spans: list[Span] = []
        for detailed in await asyncio.gather(*(detail(t) for t in todo)):
            if detailed is None:
                continue
            info = trace_info_v3(detailed, self.settings.self_marker)
            if self.filter.keep(info):  # observation metadata can mark our own traffic
                spans += [
                    s for s in v3_trace_spans(detailed, info) if state.changed(s.span_id, fingerprint(s), s.start_ns)
                ]
        return spans
