"""The Langfuse sink: metric results as scores, failing threads as annotation-queue items.

Per-turn results score the turn's trace (`traceId` + `observationId` of its root observation),
thread results score the session (`sessionId`; a thread without a session is one trace and
scores that trace). Where a score goes, its timestamp and environment come from the delivery's
anchor, which the pipeline built from the thread it evaluated: the sink never reads the store. Only results with status `ok` are written: `skipped`, `not_applicable` and
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
batch `POST /scores` with `timestamp` (servers >= v4.59). The sink takes the outbox's batches and
writes `MAX_REQUEST_SCORES` scores to a request; a request with a score the server refuses for good
fails the batch, which the outbox then tries again row by row, so that only that score is parked.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from tracing_eval.connectors.langfuse.client import LangfuseClient, LangfuseError, permanent
from tracing_eval.connectors.langfuse.configs import ConfigRef, ScoreConfigs, score_name
from tracing_eval.connectors.langfuse.mapping import SOURCE, is_virtual, iso
from tracing_eval.connectors.langfuse.review import ReviewRouter
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.conventions.values import dumps
from tracing_eval.delivery import Delivery, ResultDelivery, RetractDelivery
from tracing_eval.model import RESULT_NAMESPACE, MetricResult, Status
from tracing_eval.sinks import BaseSink, PermanentSinkError

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


def environment(value: str | None) -> str | None:
    """The trace's environment as Langfuse takes it (lower case, no `langfuse` prefix), else None."""
    return value if value is not None and _ENVIRONMENT.match(value) else None


def target(delivery: ResultDelivery) -> Target:
    """Where the score of a result goes, from its delivery: a thread result of a session scores the
    session, any other result its trace (a turn result: at the turn's root observation). The
    timestamp is the start of the target's trace (a session's: its earliest trace)."""
    a = delivery.anchor
    env = environment(a.environment)
    if delivery.target == "thread" and delivery.session_id is not None:
        return Target(a.start_ns, session_id=delivery.session_id, environment=env)
    if delivery.target == "thread":  # a lone trace: the thread key names it
        trace_id = delivery.thread_key.partition(":")[2].removeprefix("trace:")
        return Target(a.start_ns, trace_id=trace_id, environment=env)
    named = delivery.target.removeprefix("trace:") if delivery.target.startswith("trace:") else a.trace_id
    if not named or named != a.trace_id:
        raise PermanentSinkError(
            f"{delivery.thread_key} {delivery.target}: the delivery's anchor is trace {a.trace_id!r}"
        )
    observation = None if is_virtual(a.span_id) else a.span_id
    return Target(a.start_ns, trace_id=named, observation_id=observation, environment=env)


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


#: A score to write: its body and its ISO timestamp.
Score = tuple[dict[str, Any], str]

#: Bytes of scores per request: under the 3.5 MB documented for `/ingestion` and the 1 MiB body
#: limit of `POST /scores`, with room for the envelope.
MAX_REQUEST_BYTES = {"ingestion": 3_000_000, "scores": 900_000}
#: Scores per request, about the SDK's own batches (15 events): small enough that a request never
#: nears a client timeout, large enough that a 10-turn thread's scores take one or two requests.
MAX_REQUEST_SCORES = 20


def chunks(scores: Sequence[Score], max_bytes: int, max_scores: int = MAX_REQUEST_SCORES) -> Iterator[list[Score]]:
    """`scores` in order, cut into runs of at most `max_scores` whose JSON bodies hold at most
    `max_bytes` together (a score larger than that goes alone)."""
    run: list[Score] = []
    size = 0
    for score in scores:
        n = len(dumps(score[0])) + 200  # the body, its timestamp and the event envelope
        if run and (size + n > max_bytes or len(run) == max_scores):
            yield run
            run, size = [], 0
        run.append(score)
        size += n
    if run:
        yield run


class ScoreWriter:
    """Writes scores through the upserting path of the server (see the module docstring), up to
    `MAX_REQUEST_SCORES` to a request and within its body limit."""

    def __init__(self, client: LangfuseClient, mode: str = "auto") -> None:
        self.client = client
        self.mode = "ingestion" if mode == "auto" else mode
        self.fallback = mode == "auto"

    async def write(self, scores: Sequence[Score]) -> None:
        if not scores:
            return
        if self.mode == "ingestion":
            try:
                for run in chunks(scores, MAX_REQUEST_BYTES["ingestion"]):
                    await self._ingest(run)
                return
            except LangfuseError as exc:
                if not (self.fallback and exc.status in (404, 405, 410)):
                    raise
                log.warning("POST /ingestion is gone; writing scores with POST /scores", status=exc.status)
                self.mode = "scores"
        for run in chunks(scores, MAX_REQUEST_BYTES["scores"]):
            await self._batch(run)

    async def _ingest(self, scores: list[Score]) -> None:
        answer = await self.client.ingest([_event(body, ts) for body, ts in scores])
        errors = [e for e in (answer.get("errors") or []) if isinstance(e, dict)] if isinstance(answer, dict) else []
        if errors:  # one transient error makes the whole batch worth retrying, else it is refused
            first = next((e for e in errors if not permanent(_status(e))), errors[0])
            reason = first.get("message") or first.get("error") or first
            raise LangfuseError(
                f"score-create rejected ({len(errors)} of {len(scores)}): {reason}", status=_status(first), body=errors
            )

    async def _batch(self, scores: list[Score]) -> None:
        answer = await self.client.create_scores([{**body, "timestamp": ts} for body, ts in scores])
        rejected = getattr(answer, "rejected", 0) or 0
        if rejected:  # a 207 is not retried as a whole (the outbox tries the scores again one by one)
            errors = getattr(answer, "errors", None) or []
            raise PermanentSinkError(
                f"POST /scores rejected {rejected} of {len(scores)}: {[getattr(e, 'message', e) for e in errors]}"
            )


def _event(body: dict[str, Any], timestamp: str) -> dict[str, Any]:
    """The `score-create` event of a score; the same content gets the same event id."""
    event_id = str(uuid.uuid5(RESULT_NAMESPACE, dumps(body) + timestamp))
    return {"id": event_id, "timestamp": timestamp, "type": "score-create", "body": body}


def _status(error: dict[str, Any]) -> int:
    """An `/ingestion` event error's HTTP status (500 when it has none)."""
    status = error.get("status")
    return status if isinstance(status, int) else 500


class LangfuseSink(BaseSink):
    """`Sink` named `langfuse`: results -> scores, reviews -> the annotation queue, retractions ->
    scores deleted. Everything it writes comes from the delivery: it never reads the store. It
    takes the outbox's batches of results and writes their scores `MAX_REQUEST_SCORES` to a
    request (`ScoreWriter`)."""

    name = SOURCE
    batch = True

    def __init__(self, settings: LangfuseSettings, *, client: LangfuseClient | None = None) -> None:
        self.settings = settings
        self.client = client or LangfuseClient(settings)
        self.configs = ScoreConfigs(self.client)
        self.writer = ScoreWriter(self.client, settings.score_write)
        self.review = ReviewRouter(self.client, self.configs, settings.review_queue) if settings.review_queue else None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def deliver(self, delivery: Delivery) -> None:
        await self.deliver_batch([delivery])

    async def deliver_batch(self, deliveries: Sequence[Delivery]) -> None:
        """The scores of the results, `MAX_REQUEST_SCORES` to a request; a retraction or a review
        goes out after the scores before it, so that it never overtakes them."""
        scores: list[Score] = []
        try:
            for delivery in deliveries:
                if isinstance(delivery, ResultDelivery):
                    scores += await self._score(delivery)
                    continue
                await self.writer.write(scores)
                scores = []
                if isinstance(delivery, RetractDelivery):  # the result's thread merged into another
                    await self.client.delete_score(delivery.result_id)
                elif self.review is not None:
                    await self.review.route(delivery)
            await self.writer.write(scores)
        except LangfuseError as exc:
            if exc.permanent:
                raise PermanentSinkError(str(exc)) from exc
            raise

    async def _score(self, delivery: ResultDelivery) -> list[Score]:
        """The score of a result (none for a result that is not `ok`)."""
        result = delivery.result
        if result.status is not Status.OK or result.score is None:
            return []
        where = target(delivery)
        if where.start_ns <= 0:
            raise PermanentSinkError(f"{delivery.thread_key} {delivery.target}: no start time for the score timestamp")
        config = await self.configs.for_metric(result.metric)
        scale = self.configs.scale(result.metric)
        if config is not None and config.data_type == "CATEGORICAL" and (scale is None or result.label not in scale):
            raise PermanentSinkError(f"{result.metric}: label {result.label!r} is not a category of its score config")
        return [(build_score(delivery.result_id, result, where, config, delivery.thread_version), iso(where.start_ns))]
