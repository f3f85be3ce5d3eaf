"""What sinks are handed: one typed delivery per outbox row, built by the pipeline.

Three kinds, named by the outbox row's `kind`: a metric result (`ResultDelivery`), a thread routed
for review (`ReviewDelivery`), and the retraction of a result whose thread merged into another
(`RetractDelivery`). Each carries what every sink needs, so no sink reads the store: the thread key
and its session, and the `Anchor` (trace id, root span id, response id, the target's start time and
the trace's environment) taken from the thread the pipeline assembled for the evaluation.

Payloads are stored as JSON with `format: 2`. Rows written before this contract (no `format`) are
read too: their missing session id is derived from the thread key, and a result's anchor, which
then lacks the environment (and, for a thread, the start of its earliest trace), is rebuilt once
from the store before any sink sees it (`sinks.deliver_outbox`; docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from tracing_eval.identity import session_of
from tracing_eval.model import MetricResult, Thread

if TYPE_CHECKING:
    from tracing_eval.assemble import TracePart

#: The payload format written now; rows without `format` are of format 1.
FORMAT = 2
RESULT, REVIEW, RETRACT = "result", "review", "retract"
#: The kinds a sink may take, in the order the telemetry lists them (`retract` goes with `result`).
KINDS: tuple[str, ...] = (RESULT, REVIEW)


class Anchor(BaseModel):
    """Where a delivery attaches in the traces it came from.

    A turn's: its trace, root span (the observation id in Langfuse), response id, the root's start
    time and the trace's environment. A thread's: the last turn's trace, root span and response
    id, the conversation id, and the start time and environment of its earliest trace."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    trace_id: str | None = None
    span_id: str | None = None
    response_id: str | None = None
    start_ns: int = 0
    conversation_id: str | None = None
    environment: str | None = None


class _Delivery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    format: int = 1  # absent in rows written before the typed contract
    thread_key: str

    @model_validator(mode="before")
    @classmethod
    def _session(cls, data: Any) -> Any:
        """Rows of format 1 have no session id: it is the conversation the thread key names."""
        if isinstance(data, Mapping) and "session_id" not in data and "session_id" in cls.model_fields:
            key = data.get("thread_key")
            return {**data, "session_id": session_of(key) if isinstance(key, str) else None}
        return data


class ResultDelivery(_Delivery):
    """One metric result of one thread version, with where it attaches."""

    kind: Literal["result"] = "result"
    result_id: str
    thread_version: int
    target: str
    session_id: str | None = None
    anchor: Anchor = Anchor()
    result: MetricResult

    @property
    def legacy(self) -> bool:
        """Written before the typed contract: the anchor may lack what only the store knows."""
        return self.format < FORMAT

    def payload(self, result_json: bytes | None = None) -> bytes:
        """The outbox payload (JSON); `result_json`: the result already serialised, to reuse."""
        head = self.model_dump(mode="json", exclude={"kind", "result", "format"}, exclude_none=False)
        result = orjson.Fragment(result_json) if result_json is not None else self.result.model_dump(mode="json")
        return orjson.dumps({"format": FORMAT, **head, "result": result})


class ReviewDelivery(_Delivery):
    """A thread version routed for review: why, with what priority, and to which destinations."""

    kind: Literal["review"] = "review"
    review_id: int | None = None
    thread_version: int
    session_id: str | None = None
    anchor: Anchor = Anchor()
    reasons: list[dict[str, Any]] = []
    priority: str | None = None
    routes: list[str] | None = None
    destinations: list[str] | None = None  # None: every review sink (rows of format 1 may lack it)
    links: dict[str, Any] = {}

    def payload(self) -> bytes:
        return orjson.dumps({**self.model_dump(mode="json", exclude={"kind"}), "format": FORMAT})

    def goes_to(self, sink: str) -> bool:
        """Whether this item was routed to `sink`."""
        return self.destinations is None or sink in self.destinations


class RetractDelivery(_Delivery):
    """A result whose thread merged into another: sinks that keep results delete it."""

    kind: Literal["retract"] = "retract"
    result_id: str
    merged_into: str
    metric: str | None = None
    target: str | None = None

    def payload(self) -> bytes:
        return orjson.dumps({**self.model_dump(mode="json", exclude={"kind"}), "format": FORMAT})


Delivery = ResultDelivery | ReviewDelivery | RetractDelivery
_MODELS: dict[str, type[ResultDelivery] | type[ReviewDelivery] | type[RetractDelivery]] = {
    RESULT: ResultDelivery,
    REVIEW: ReviewDelivery,
    RETRACT: RetractDelivery,
}


class BadPayload(ValueError):
    """An outbox payload that is not a delivery of its kind (it never will be: the row is parked)."""


def parse(kind: str, payload: Mapping[str, Any], row_id: int | None = None) -> Delivery:
    """The typed delivery of one outbox row (`kind` is the row's kind); `BadPayload` names the row
    and the fields that are wrong."""
    model = _MODELS.get(kind)
    if model is None:
        raise BadPayload(f"{_where(kind, row_id)}: unknown kind {kind!r}; known: {', '.join(_MODELS)}")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors())
        raise BadPayload(f"{_where(kind, row_id)}: {wrong}") from None


def _where(kind: str, row_id: int | None) -> str:
    """What an error names: the outbox row, else the kind of payload."""
    return f"outbox row {row_id} ({kind})" if row_id is not None else f"{kind} payload"


def anchor(thread: Thread, turn_index: int | None, traces: Sequence[TracePart] = ()) -> Anchor:
    """Where a result of `thread` attaches (`turn_index` None: a thread result). `traces` are the
    assembled parts of the thread's traces: their start times and environments."""
    by_trace = {p.trace_id: p for p in traces}
    earliest = min(traces, key=lambda p: (p.start_ns, p.trace_id)) if traces else None
    if not thread.turns:
        return Anchor(conversation_id=thread.conversation_id)
    turn = thread.turns[-1 if turn_index is None else min(turn_index, len(thread.turns) - 1)]
    if turn_index is None:  # the thread: its earliest trace (a trace that yielded no turn counts too)
        start = earliest.start_ns if earliest is not None else thread.turns[0].started_ns
        environment = earliest.environment if earliest is not None else None
    else:
        part = by_trace.get(turn.trace_id or "")
        start, environment = turn.started_ns, part.environment if part is not None else None
    return Anchor(
        trace_id=turn.trace_id,
        span_id=turn.root_span_id,
        response_id=turn.response_id,
        start_ns=start,
        conversation_id=thread.conversation_id,
        environment=environment,
    )


class Anchors:
    """`anchor` for the results of one evaluated thread, each turn's built once: a thread's results
    share a few anchors (one per turn and one for the thread)."""

    def __init__(self, thread: Thread, traces: Sequence[TracePart] = ()) -> None:
        self.thread = thread
        self.traces = traces
        self._by_turn: dict[int | None, Anchor] = {}

    def of(self, turn_index: int | None) -> Anchor:
        found = self._by_turn.get(turn_index)
        if found is None:
            found = self._by_turn[turn_index] = anchor(self.thread, turn_index, self.traces)
        return found


def result_payload(
    result_id: str,
    thread_key: str,
    thread_version: int,
    target: str,
    anchor_json: bytes,
    result_json: bytes,
) -> bytes:
    """The outbox payload of a result (`ResultDelivery.payload`, byte for byte) from its parts
    already serialised: `anchor_json` (the anchor's JSON) and `result_json` (the result's), without
    building the delivery model. The store writes one per result it records."""
    return orjson.dumps(
        {
            "format": FORMAT,
            "thread_key": thread_key,
            "result_id": result_id,
            "thread_version": thread_version,
            "target": target,
            "session_id": session_of(thread_key),
            "anchor": orjson.Fragment(anchor_json),
            "result": orjson.Fragment(result_json),
        }
    )


def turn_index(thread: Thread, target: str) -> int | None:
    """The turn a result's target names (`trace:<id>` or `turn:<n>`); None for `thread`."""
    if target.startswith("trace:"):
        trace_id = target.removeprefix("trace:")
        return next((t.index for t in thread.turns if t.trace_id == trace_id), None)
    if target.startswith("turn:"):
        return int(target.removeprefix("turn:"))
    return None
