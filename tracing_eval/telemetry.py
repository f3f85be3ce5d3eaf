"""Prometheus telemetry of one worker: its counters, gauges and histograms, in its own registry.

One `Telemetry` per worker, passed down explicitly to the receiver, the pipeline, the judge client
and outbox delivery; nothing goes to prometheus_client's global default registry, so tests and
several workers in one process never clash. The methods are what the parts report; the gauges read
from the store (outbox backlog, threads ready) are set by `Pipeline.observe_store` at scrape time,
those kept in memory (a sink's failing time) by `Pipeline.observe_memory`.
Every series is named `tracing_eval_*` and carries its unit (`_total`, `_seconds`, `_usd`).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tracing_eval.metrics.judged.base import JudgeUsage
from tracing_eval.model import MetricResult

TICK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
JUDGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
DELIVERED, RETRIED, FAILED = "delivered", "retried", "failed"
UNREADABLE_REASONS = ("no_turn", "unknown_answer")
RETENTION_TABLES = (
    "spans",
    "events",
    "messages",
    "traces",
    "turns",
    "results",
    "review_items",
    "threads",
    "outbox",
    "parked",
    "judge_cache",
)


class Telemetry:
    """The series of one worker and the small state its readiness check reads (failing sinks)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry(auto_describe=True)
        # ingest
        self.spans_received = Counter(
            "tracing_eval_spans_received_total", "Spans stored, by source.", ["source"], registry=r
        )
        self.events_received = Counter(
            "tracing_eval_events_received_total",
            "Log events (joined to spans) stored, by source.",
            ["source"],
            registry=r,
        )
        self.threads_received = Counter(
            "tracing_eval_threads_received_total",
            "Threads that got new data, by source (a thread counts once per transaction that stores its data).",
            ["source"],
            registry=r,
        )
        self.receiver_rejects = Counter(
            "tracing_eval_receiver_rejects_total",
            "OTLP requests refused or partly rejected, by reason.",
            ["reason"],
            registry=r,
        )
        self.unreadable_spans = Counter(
            "tracing_eval_unreadable_spans_total",
            "Spans whose content no convention could read, once per trace, by reason (no_turn: a trace "
            "that yielded no turn; unknown_answer: a turn whose answer could not be read).",
            ["reason"],
            registry=r,
        )
        self.source_errors = Counter(
            "tracing_eval_source_errors_total", "Pulls of a source that failed, by source.", ["source"], registry=r
        )
        # evaluation
        self.threads_evaluated = Counter(
            "tracing_eval_threads_evaluated_total",
            "Claimed threads evaluated and recorded, by mode (thread: whole thread once idle; turns: settled turns).",
            ["mode"],
            registry=r,
        )
        self.evaluations = Counter(
            "tracing_eval_evaluations_total",
            "Metric results recorded, by metric and status.",
            ["metric", "status"],
            registry=r,
        )
        self.evaluation_errors = Counter(
            "tracing_eval_evaluation_errors_total",
            "Thread evaluations that failed; gave_up=true when the thread was marked failed.",
            ["gave_up"],
            registry=r,
        )
        self.lost_leases = Counter(
            "tracing_eval_lost_leases_total", "Evaluations discarded because another worker took the lease.", registry=r
        )
        self.tick_duration = Histogram(
            "tracing_eval_tick_duration_seconds",
            "Duration of one tick (pull, claim, evaluate, record; `run` delivers in rounds of its own).",
            buckets=TICK_BUCKETS,
            registry=r,
        )
        self.tick_failures = Counter(
            "tracing_eval_tick_failures_total", "Ticks that raised (the next tick retries).", registry=r
        )
        self.last_tick = Gauge(
            "tracing_eval_last_tick_timestamp_seconds", "Unix time the last tick finished.", registry=r
        )
        self.threads_ready = Gauge(
            "tracing_eval_threads_ready",
            "Threads ready to be claimed now, by the mode they would be claimed in (read from the store).",
            ["mode"],
            registry=r,
        )
        # judge
        self.judge_calls = Counter(
            "tracing_eval_judge_calls_total",
            "Judge HTTP calls (every attempt), by metric and outcome.",
            ["metric", "outcome"],
            registry=r,
        )
        self.judge_call_duration = Histogram(
            "tracing_eval_judge_call_duration_seconds",
            "Duration of one judge HTTP call (every attempt, any outcome).",
            buckets=JUDGE_BUCKETS,
            registry=r,
        )
        self.judge_tokens = Counter(
            "tracing_eval_judge_tokens_total",
            "Judge tokens by metric and type (input, output, cached_input; cached_input is part of input).",
            ["metric", "type"],
            registry=r,
        )
        self.judge_cost = Counter(
            "tracing_eval_judge_cost_usd_total",
            "Judge cost in USD from the configured prices, by metric.",
            ["metric"],
            registry=r,
        )
        self.judge_cache_hits = Counter(
            "tracing_eval_judge_cache_hits_total",
            "Judge requests answered from the cache, by metric.",
            ["metric"],
            registry=r,
        )
        self.judge_rate_limited = Counter(
            "tracing_eval_judge_rate_limited_total", "Judge calls answered 429, by metric.", ["metric"], registry=r
        )
        self.judge_retries = Counter(
            "tracing_eval_judge_retries_total",
            "Judge calls retried (429, 5xx, timeouts), by metric.",
            ["metric"],
            registry=r,
        )
        self.judge_reasks = Counter(
            "tracing_eval_judge_reasks_total",
            "Corrective re-asks after a malformed answer, by metric.",
            ["metric"],
            registry=r,
        )
        self.judge_concurrency_limit = Gauge(
            "tracing_eval_judge_concurrency_limit", "Current adaptive cap on judge calls in flight.", registry=r
        )
        # sinks and the outbox
        self.sink_deliveries = Counter(
            "tracing_eval_sink_deliveries_total",
            "Outbox delivery attempts by sink, payload kind and outcome (delivered, retried, failed = parked).",
            ["sink", "kind", "outcome"],
            registry=r,
        )
        self.sink_errors = Counter(
            "tracing_eval_sink_errors_total",
            "Failed outbox delivery attempts by sink and payload kind.",
            ["sink", "kind"],
            registry=r,
        )
        self.sink_failing = Gauge(
            "tracing_eval_sink_failing_seconds",
            "How long every delivery attempt to the sink has failed (0 when its last attempt succeeded).",
            ["sink"],
            registry=r,
        )
        self.outbox_backlog = Gauge(
            "tracing_eval_outbox_backlog",
            "Outbox rows waiting for delivery, by sink (read from the store).",
            ["sink"],
            registry=r,
        )
        self.outbox_oldest_age = Gauge(
            "tracing_eval_outbox_oldest_age_seconds",
            "Age of the oldest outbox row waiting for delivery, by sink (0 when none).",
            ["sink"],
            registry=r,
        )
        # the store and retention
        self.store_bytes = Gauge(
            "tracing_eval_store_bytes",
            "Size of the store (SQLite: the database file without its WAL; PostgreSQL: the database), read "
            "from the store.",
            registry=r,
        )
        self.store_free_bytes = Gauge(
            "tracing_eval_store_free_bytes",
            "SQLite: bytes of the database file free for reuse, not yet given back by retention.",
            registry=r,
        )
        self.retention_deleted = Counter(
            "tracing_eval_retention_deleted_total",
            "Rows deleted by retention, by table (spans, events, messages, traces, turns, results, "
            "review_items, threads, outbox, parked, judge_cache).",
            ["table"],
            registry=r,
        )
        self.retention_runs = Counter(
            "tracing_eval_retention_runs_total",
            "Retention runs, by whether they finished (false: out of time, the next run goes on).",
            ["finished"],
            registry=r,
        )
        self.store_up = Gauge(
            "tracing_eval_store_up", "1 when the last read of the store for these gauges succeeded, else 0.", registry=r
        )
        #: sink -> when its current run of failed deliveries began (absent: its last attempt succeeded)
        self.sink_failing_since: dict[str, float] = {}

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)

    def prime(
        self,
        *,
        reject_reasons: Iterable[str] = (),
        sinks: Mapping[str, Iterable[str]] | None = None,
        sources: Iterable[str] = (),
    ) -> None:
        """Create the series whose labels are known up front, at 0, so rates and alerts see them from
        the start. `sinks` maps each outbox sink to the payload kinds it takes."""
        for reason in reject_reasons:
            self.receiver_rejects.labels(reason)
        for source in sources:
            for counter in (self.spans_received, self.events_received, self.threads_received):
                counter.labels(source)
        for sink, kinds in (sinks or {}).items():
            for kind in kinds:
                self.sink_errors.labels(sink, kind)
            self.sink_failing.labels(sink).set(0)
            self.outbox_backlog.labels(sink).set(0)
            self.outbox_oldest_age.labels(sink).set(0)
        for mode in ("thread", "turns"):
            self.threads_evaluated.labels(mode)
            self.threads_ready.labels(mode).set(0)
        for reason in UNREADABLE_REASONS:
            self.unreadable_spans.labels(reason)
        self.evaluation_errors.labels("false")
        self.evaluation_errors.labels("true")
        for table in RETENTION_TABLES:
            self.retention_deleted.labels(table)

    # -- ingest -------------------------------------------------------------------------------

    def received(self, source: str, spans: int, events: int, threads: int) -> None:
        self.spans_received.labels(source).inc(spans)
        self.events_received.labels(source).inc(events)
        self.threads_received.labels(source).inc(threads)

    def rejected(self, reason: str) -> None:
        self.receiver_rejects.labels(reason).inc()

    # -- evaluation ---------------------------------------------------------------------------

    def evaluated(self, mode: str, results: Iterable[MetricResult]) -> None:
        self.threads_evaluated.labels(mode).inc()
        # counted by series first: a thread's few dozen results fall in a handful of series
        for (metric, status), n in collections.Counter((r.metric, r.status.value) for r in results).items():
            self.evaluations.labels(metric, status).inc(n)

    def tick_done(self, seconds: float, finished_at: float) -> None:
        self.tick_duration.observe(seconds)
        self.last_tick.set(finished_at)

    # -- judge (the `JudgeObserver` of `tracing_eval.judge`) ----------------------------------------

    def judge_call(self, metric: str, outcome: str, seconds: float) -> None:
        self.judge_calls.labels(metric, outcome).inc()
        self.judge_call_duration.observe(seconds)
        if outcome == "rate_limited":
            self.judge_rate_limited.labels(metric).inc()

    def judge_usage(self, metric: str, usage: JudgeUsage) -> None:
        if usage.cache_hits:
            self.judge_cache_hits.labels(metric).inc(usage.cache_hits)
        if usage.calls:
            self.judge_tokens.labels(metric, "input").inc(usage.input_tokens)
            self.judge_tokens.labels(metric, "output").inc(usage.output_tokens)
            self.judge_tokens.labels(metric, "cached_input").inc(usage.cached_input_tokens)
            self.judge_cost.labels(metric).inc(usage.cost_usd)

    def judge_retry(self, metric: str) -> None:
        self.judge_retries.labels(metric).inc()

    def judge_reask(self, metric: str) -> None:
        self.judge_reasks.labels(metric).inc()

    # -- sinks and the outbox ---------------------------------------------------------------------

    def delivery(self, sink: str, kind: str, outcome: str, now: float, *, refused: bool = False, rows: int = 1) -> None:
        """An outbox delivery attempt of `rows` rows of one kind. A failure starts (or continues) the
        sink's failing run, a success ends it; a payload the sink `refused` for good
        (PermanentSinkError) does neither."""
        self.sink_deliveries.labels(sink, kind, outcome).inc(rows)
        if outcome == DELIVERED:
            self.sink_failing_since.pop(sink, None)
            return
        self.sink_errors.labels(sink, kind).inc()
        if not refused:
            self.sink_failing_since.setdefault(sink, now)

    def failing_sinks(self, now: float, longer_than: float) -> dict[str, float]:
        """Sinks failing for more than `longer_than` seconds, with for how long."""
        return {s: now - since for s, since in self.sink_failing_since.items() if now - since > longer_than}

    def sinks_state(self, now: float, sinks: Iterable[str]) -> None:
        """Set how long each sink has been failing (kept in memory, so set even when the store is down)."""
        for sink in {*sinks, *self.sink_failing_since}:
            self.sink_failing.labels(sink).set(max(0.0, now - self.sink_failing_since.get(sink, now)))

    def retained(self, deleted: Mapping[str, int], finished: bool) -> None:
        for table, n in deleted.items():
            self.retention_deleted.labels(table).inc(n)
        self.retention_runs.labels(str(finished).lower()).inc()

    def store_state(
        self,
        now: float,
        outbox: Mapping[str, tuple[int, float]],
        ready: Mapping[str, int],
        sinks: Iterable[str],
        size: tuple[int, int | None] | None = None,
    ) -> None:
        """Set the gauges read from the store: backlog and oldest age per sink (0 for an outbox sink
        with nothing pending), threads ready per mode, and the store's size."""
        self.outbox_backlog.clear()
        self.outbox_oldest_age.clear()
        for sink in {*sinks, *outbox}:
            backlog, age = outbox.get(sink, (0, 0.0))
            self.outbox_backlog.labels(sink).set(backlog)
            self.outbox_oldest_age.labels(sink).set(age)
        for mode in ("thread", "turns"):
            self.threads_ready.labels(mode).set(ready.get(mode, 0))
        if size is not None:
            self.store_bytes.set(size[0])
            if size[1] is not None:
                self.store_free_bytes.set(size[1])
        self.store_up.set(1)
