"""What the engine asks of a state store, as plain data and one protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from tracing_eval.delivery import FORMAT, Anchor, ResultDelivery, ReviewDelivery
from tracing_eval.identity import session_of
from tracing_eval.model import MetricResult, Span


class Mode(StrEnum):
    """What a claim is for: per-turn metrics of settled turns, or the whole thread once idle."""

    TURNS = "turns"
    THREAD = "thread"


@dataclass(frozen=True)
class Claim:
    thread_key: str
    version: int
    mode: Mode
    owner: str
    attempts: int


@dataclass(frozen=True)
class Readiness:
    """Readiness windows in seconds; `--once` passes zeros to treat everything as settled."""

    turn_settle: float
    thread_idle: float


@dataclass
class StoredResult:
    id: str
    thread_key: str
    target: str
    thread_version: int
    result: MetricResult


@dataclass
class Outgoing:
    """A result with its deterministic id and where sinks attach it, ready to be recorded."""

    id: str
    target: str
    result: MetricResult
    anchor: Anchor = field(default_factory=Anchor)

    def delivery(self, thread_key: str, version: int) -> ResultDelivery:
        """What the outbox hands the sinks for this result of `thread_key` at `version`."""
        return ResultDelivery(
            format=FORMAT,
            result_id=self.id,
            thread_key=thread_key,
            thread_version=version,
            target=self.target,
            session_id=session_of(thread_key),
            anchor=self.anchor,
            result=self.result,
        )


@dataclass
class StoredThread:
    """A thread as `Store.load_thread` finds it: `parts` holds the stored part (see
    `assemble.TracePart`) of each trace that need not be assembled again; `traces` the spans of each
    trace that must be, with its revision in `revisions` (to store its new part under)."""

    key: str
    parts: dict[str, bytes] = field(default_factory=dict)
    traces: dict[str, list[Span]] = field(default_factory=dict)
    revisions: dict[str, int] = field(default_factory=dict)


@dataclass
class Evaluated:
    """One claim's evaluation, ready to be recorded: results, review request, and the parts of the
    traces assembled for it (trace id -> (revision, stored part))."""

    claim: Claim
    outgoing: list[Outgoing]
    review: ReviewRequest | None = None
    parts: dict[str, tuple[int, bytes]] = field(default_factory=dict)


@dataclass
class ReviewRequest:
    """A thread routed for review: why, which outbox sinks get it, and whether the local queue shows it."""

    reasons: list[dict[str, Any]]
    sinks: list[str] = field(default_factory=list)
    local: bool = True  # False: recorded (once per version) but not open in the local queue
    fields: dict[str, Any] = field(default_factory=dict)  # priority, routes, destinations
    anchor: Anchor = field(default_factory=Anchor)

    def delivery(self, review_id: int, thread_key: str, version: int) -> ReviewDelivery:
        """What the outbox hands the review sinks: this request as the review item `review_id`."""
        return ReviewDelivery(
            format=FORMAT,
            review_id=review_id,
            thread_key=thread_key,
            thread_version=version,
            session_id=session_of(thread_key),
            anchor=self.anchor,
            reasons=self.reasons,
            **self.fields,
        )


@dataclass
class ReviewItem:
    id: int
    thread_key: str
    thread_version: int
    status: str
    reasons: list[dict[str, Any]]
    created_at: float
    resolved_at: float | None = None
    resolution: str | None = None


@dataclass
class OutboxRow:
    id: int
    sink: str
    kind: str
    ref: str
    payload: dict[str, Any]
    attempts: int
    lease_until: float = 0.0  # PostgreSQL: the lease this replica holds on the row (its `next_attempt_at`)


@dataclass
class IngestBatch:
    """Spans and joined log events from one request or file chunk, plus source progress."""

    spans: list[Span] = field(default_factory=list)
    events: list[tuple[str, str, Any]] = field(default_factory=list)  # (trace_id, span_id, SpanEvent)
    conversations: dict[str, str] = field(default_factory=dict)  # trace id -> conversation id
    source: str = "otlp"
    source_state: dict[str, str] = field(default_factory=dict)


@dataclass
class IngestStats:
    spans: int = 0
    events: int = 0
    threads_changed: int = 0


class IngestRefused(Exception):
    """The store refused the batch for what it holds (a value out of range, text it cannot store):
    the same batch would fail again, so it must not be retried as it is. `detail` says what, without
    the batch's data. Any other exception from `Store.ingest` is transient (retry later)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Store(Protocol):
    """The durable state behind the pipeline. Every method is one transaction."""

    dialect: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ingest(self, batch: IngestBatch, now: float) -> IngestStats: ...

    async def get_source_state(self, name: str) -> str | None: ...

    async def claim(
        self, owner: str, now: float, ready: Readiness, limit: int, lease_seconds: float
    ) -> list[Claim]: ...

    async def load_traces(self, thread_key: str) -> list[list[Span]]: ...

    async def load_thread(self, thread_key: str) -> StoredThread: ...

    async def load_threads(self, thread_keys: Sequence[str]) -> dict[str, StoredThread]: ...

    async def record(
        self,
        claim: Claim,
        outgoing: list[Outgoing],
        review: ReviewRequest | None,
        sinks: list[str],
        now: float,
    ) -> bool: ...

    async def record_many(self, items: Sequence[Evaluated], sinks: list[str], now: float) -> list[bool]: ...

    async def release(self, claim: Claim, error: str, now: float, retry_in: float, give_up: bool) -> None: ...

    async def results(self, thread_key: str | None = None) -> list[StoredResult]: ...

    async def thread_keys(self) -> list[str]: ...

    async def renew_outbox(self, row: OutboxRow, now: float, lease_seconds: float) -> OutboxRow | None:
        """Just before delivering `row`: extend this replica's lease on it to `now + lease_seconds`, or
        None when another replica has taken it over since (its lease ran out while it waited)."""
        ...

    async def renew_outbox_many(
        self, rows: Sequence[OutboxRow], now: float, lease_seconds: float
    ) -> list[OutboxRow | None]: ...

    async def pending_outbox(
        self, sink: str, now: float, limit: int, lease_seconds: float = ...
    ) -> list[OutboxRow]: ...

    async def outbox_done(self, row_ids: Sequence[int], now: float) -> None: ...

    async def outbox_retry(self, row_id: int, error: str, next_attempt_at: float, give_up: bool) -> None: ...

    async def review_items(self, status: str | None = "open") -> list[ReviewItem]: ...

    async def review_item(self, item_id: int) -> ReviewItem | None: ...

    async def resolve_review(self, item_id: int, resolution: str, now: float) -> bool: ...

    async def cache_get(self, key: str) -> dict[str, Any] | None: ...

    async def cache_put(self, key: str, value: dict[str, Any], now: float) -> None: ...

    async def ping(self) -> None: ...

    async def outbox_stats(self, now: float) -> dict[str, tuple[int, float]]: ...

    async def threads_ready(self, now: float, ready: Readiness) -> dict[str, int]: ...

    async def release_owned(self, owner: str) -> int: ...

    async def size(self) -> tuple[int, int | None]: ...

    # retention (see `tracing_eval.retention`)

    async def prunable_threads(self, idle_before: float, limit: int) -> list[tuple[str, bool]]: ...

    async def prune_spans(
        self, keys: Sequence[str], parts: dict[str, tuple[int, bytes]], idle_before: float
    ) -> dict[str, int]: ...

    async def expired_threads(self, idle_before: float, limit: int) -> list[str]: ...

    async def delete_threads(self, keys: Sequence[str], idle_before: float) -> dict[str, int]: ...

    async def delete_old(self, what: str, before: float, limit: int) -> int: ...

    async def reclaim(self, pages: int) -> int: ...
