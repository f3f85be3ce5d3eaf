"""The Langfuse sink: metric results as scores, failing threads as annotation-queue items.

Per-turn results score the turn's trace (`traceId` + `observationId` of its root observation),
thread results score the session (`sessionId`; a thread without a session is one trace and
scores that trace). Only results with status `ok` are written: `skipped`, `not_applicable` and
`error` results carry no score, and writing one would look like a real 0 or 1 in Langfuse
dashboards (they stay visible in the local store and `tracing-eval results`).

Threads received over OTLP are written the same way: an app that exports to both Langfuse and
the sidecar has the same ids on both sides (the hex trace id, the root span id as observation id,
`gen_ai.conversation.id` or `session.id` as the session id).

A result whose thread merged into another (a trace that joined its conversation late) is retracted:
its score is deleted (`DELETE /scores/{id}`; a score that was never written is fine). Queue items and
comments already written for such a thread stay (docs/reliability.md).

Idempotency: the score `id` is the outbox `result_id` (uuid5 of thread, target and metric) and
its timestamp is the target's start time (the trace's root start, or the session's first trace),
so a redelivery or a re-evaluation lands on the same ClickHouse row (same id, name and date).
Scores go through the path that upserts on the server: `score-create` events on `/ingestion`
(v3 and v4; the event timestamp is the score timestamp), or, where `/ingestion` is gone, the
batch `POST /scores` with `timestamp` (servers >= v4.59).
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import structlog

from tracing_eval.assemble import thread_from_traces
from tracing_eval.connectors.langfuse.client import LangfuseClient, LangfuseError
from tracing_eval.connectors.langfuse.configs import ConfigRef, ScoreConfigs, score_name
from tracing_eval.connectors.langfuse.mapping import SOURCE, is_virtual, iso, trace_root
from tracing_eval.connectors.langfuse.review import ReviewRouter, split_key
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.conventions.values import dumps
from tracing_eval.model import RESULT_NAMESPACE, MetricResult, Span, Status
from tracing_eval.sinks import PermanentSinkError
from tracing_eval.store.base import Store

log = structlog.get_logger(__name__)

MAX_COMMENT = 2000
MAX_EVIDENCE = 1000
_ENVIRONMENT = re.compile(r"^(?!langfuse)[a-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Target:
    """Where a score goes and its fixed timestamp (ns)."""

    start_ns: int
    trace_id: str | None = None
    session_id: str | None = None
    observation_id: str | None = None
    environment: str | None = None


def _environment(spans: list[Span]) -> str | None:
    value = next(
        (s.attributes.get("langfuse.environment") for s in spans if s.attributes.get("langfuse.environment")), None
    )
    return value if isinstance(value, str) and _ENVIRONMENT.match(value) else None


class TargetLookup:
    """Finds a result's trace, root observation and start time in the store (cached per thread version)."""

    def __init__(self, store: Store | None, cache_size: int = 256) -> None:
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, int], list[list[Span]]] = OrderedDict()

    async def _traces(self, thread_key: str, version: int) -> list[list[Span]]:
        if self.store is None:
            raise PermanentSinkError("the Langfuse sink needs the store to find where a score goes")
        key = (thread_key, version)
        if key not in self._cache:
            self._cache[key] = await self.store.load_traces(thread_key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return self._cache[key]

    async def resolve(self, payload: dict[str, Any]) -> Target:
        thread_key, target = str(payload["thread_key"]), str(payload["target"])
        session_id, lone_trace = split_key(thread_key)
        traces = [t for t in await self._traces(thread_key, int(payload.get("thread_version") or 0)) if t]
        roots = {root.trace_id: (root, spans) for spans in traces if (root := trace_root(spans)) is not None}
        if not roots:
            raise PermanentSinkError(f"thread {thread_key} is not in the store")
        if target == "thread" and session_id is not None:
            first, spans = min(roots.values(), key=lambda r: r[0].start_ns)
            return Target(first.start_ns, session_id=session_id, environment=_environment(spans))
        if target.startswith("turn:"):
            thread = thread_from_traces(thread_key, traces, source=thread_key.partition(":")[0])
            index = int(target.removeprefix("turn:"))
            if index >= len(thread.turns) or thread.turns[index].trace_id is None:
                raise PermanentSinkError(f"{thread_key} has no turn {index}")
            trace_id: str | None = thread.turns[index].trace_id
        else:
            trace_id = target.removeprefix("trace:") if target.startswith("trace:") else lone_trace
        if trace_id not in roots:
            raise PermanentSinkError(f"trace {trace_id} of {thread_key} is not in the store")
        root, spans = roots[trace_id]
        observation = None if target == "thread" or is_virtual(root.span_id) else root.span_id
        return Target(root.start_ns, trace_id=trace_id, observation_id=observation, environment=_environment(spans))


def _evidence(evidence: dict[str, Any]) -> Any:
    text = dumps(evidence)
    return evidence if len(text) <= MAX_EVIDENCE else text[: MAX_EVIDENCE - 1] + "…"


def score_metadata(result: MetricResult, thread_version: int) -> dict[str, Any]:
    """Provenance of a score: verdict, pass/fail, metric version, judge model and tokens, evidence."""
    meta = {
        "evaluator": "tracing-eval",
        "metric": result.metric,
        "metric_version": result.metric_version,
        "scope": result.scope.value,
        "turn_index": result.turn_index,
        "label": result.label,
        "score": result.score,
        "passed": result.passed,
        "threshold": result.threshold,
        "status": result.status.value,
        "thread_version": thread_version,
        "judge_model": result.judge_model,
        "input_tokens": result.input_tokens or None,
        "output_tokens": result.output_tokens or None,
        "cost_usd": result.cost_usd or None,
        "evidence": _evidence(result.evidence) if result.evidence else None,
    }
    return {k: v for k, v in meta.items() if v is not None}


def build_score(
    score_id: str, result: MetricResult, target: Target, config: ConfigRef | None, thread_version: int
) -> dict[str, Any]:
    """The score body (fields of both `ScoreBody` and `CreateScoreRequest`), without timestamp."""
    body: dict[str, Any] = {"id": score_id, "name": score_name(result.metric)}
    if target.session_id is not None:
        body["sessionId"] = target.session_id
    else:
        body["traceId"] = target.trace_id
        if target.observation_id:
            body["observationId"] = target.observation_id
    if config is not None and config.data_type == "CATEGORICAL":
        body["value"], body["dataType"] = result.label, "CATEGORICAL"
    else:
        body["value"], body["dataType"] = float(result.score if result.score is not None else 0.0), "NUMERIC"
    if config is not None:
        body["configId"] = config.id
    if result.reason:
        body["comment"] = result.reason[:MAX_COMMENT]
    body["metadata"] = score_metadata(result, thread_version)
    if target.environment:
        body["environment"] = target.environment
    return body


class ScoreWriter:
    """Writes one score through the upserting path of the server (see the module docstring)."""

    def __init__(self, client: LangfuseClient, mode: str = "auto") -> None:
        self.client = client
        self.mode = "ingestion" if mode == "auto" else mode
        self.fallback = mode == "auto"

    async def write(self, body: dict[str, Any], timestamp: str) -> None:
        if self.mode == "ingestion":
            try:
                await self._ingest(body, timestamp)
                return
            except LangfuseError as exc:
                if not (self.fallback and exc.status in (404, 405, 410)):
                    raise
                log.warning("POST /ingestion is gone; writing scores with POST /scores", status=exc.status)
                self.mode = "scores"
        await self._batch(body, timestamp)

    async def _ingest(self, body: dict[str, Any], timestamp: str) -> None:
        event_id = str(uuid.uuid5(RESULT_NAMESPACE, dumps(body) + timestamp))  # same content -> same event
        answer = await self.client.ingest(
            [{"id": event_id, "timestamp": timestamp, "type": "score-create", "body": body}]
        )
        errors = [e for e in (answer.get("errors") or []) if isinstance(e, dict)] if isinstance(answer, dict) else []
        if errors:
            status = errors[0].get("status")
            message = f"score-create rejected: {errors[0].get('message') or errors[0].get('error') or errors[0]}"
            raise LangfuseError(message, status=status if isinstance(status, int) else 500, body=errors)

    async def _batch(self, body: dict[str, Any], timestamp: str) -> None:
        answer = await self.client.create_scores([{**body, "timestamp": timestamp}])
        rejected = getattr(answer, "rejected", 0) or 0
        if rejected:  # a 207 is never retried automatically (it would duplicate the accepted ones)
            errors = getattr(answer, "errors", None) or []
            raise PermanentSinkError(f"POST /scores rejected the score: {[getattr(e, 'message', e) for e in errors]}")


class LangfuseSink:
    """`Sink` named `langfuse`: results -> scores, reviews -> the annotation queue."""

    name = SOURCE

    def __init__(
        self,
        settings: LangfuseSettings,
        *,
        store: Store | None = None,
        client: LangfuseClient | None = None,
    ) -> None:
        self.settings = settings
        self.client = client or LangfuseClient(settings)
        self.configs = ScoreConfigs(self.client)
        self.targets = TargetLookup(store)
        self.writer = ScoreWriter(self.client, settings.score_write)
        self.review = ReviewRouter(self.client, self.configs, settings.review_queue) if settings.review_queue else None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def deliver(self, kind: str, payload: dict[str, Any]) -> None:
        try:
            if kind == "result":
                await self._score(payload)
            elif kind == "retract":  # the result's thread merged into another: its score goes
                await self.client.delete_score(str(payload["result_id"]))
            elif kind == "review" and self.review is not None:
                await self.review.route(payload)
        except LangfuseError as exc:
            if exc.permanent:
                raise PermanentSinkError(str(exc)) from exc
            raise

    async def _score(self, payload: dict[str, Any]) -> None:
        result = MetricResult.model_validate(payload["result"])
        if result.status is not Status.OK or result.score is None:
            return
        target = await self.targets.resolve(payload)
        if target.start_ns <= 0:
            raise PermanentSinkError(
                f"{payload['thread_key']} {payload['target']}: no start time for the score timestamp"
            )
        config = await self.configs.for_metric(result.metric)
        scale = self.configs.scale(result.metric)
        if config is not None and config.data_type == "CATEGORICAL" and (scale is None or result.label not in scale):
            raise PermanentSinkError(f"{result.metric}: label {result.label!r} is not a category of its score config")
        body = build_score(str(payload["result_id"]), result, target, config, int(payload.get("thread_version") or 0))
        await self.writer.write(body, iso(target.start_ns))
