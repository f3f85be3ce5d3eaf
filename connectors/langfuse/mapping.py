"""Langfuse observations and traces -> canonical spans (pure; no I/O).

Each observation becomes one `Span` whose attributes are the Langfuse OTel attributes the
engine's `langfuse` convention already reads (`langfuse.observation.type|input|output|level|
status_message|model.name|usage_details`, `langfuse.session.id`), so the normal assembly turns
one trace into one turn and one session into one thread. Ids are kept exactly as Langfuse has
them: the span id is the observation id, so a turn's root span id is the observation to score.

v4 rows come from `GET /v2/observations` (input/output as raw strings); v3 traces come from
`GET /traces/{id}` (structured input/output, observations inline, trace-level input/output). A
v3 trace whose own input/output differ from its single top-level observation gets a virtual root
span `t-<traceId>` holding them (the id Langfuse v4 uses for historic traces); virtual roots
are never sent as `observationId`.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tracing_eval.connectors.langfuse.settings import SELF_MARKER, LangfuseSettings
from tracing_eval.conventions.values import dumps
from tracing_eval.identity import is_sampled, thread_key
from tracing_eval.model import Span

SOURCE = "langfuse"
VIRTUAL_ROOT_PREFIX = "t-"
#: Metadata key that marks the worker's own judge traffic (any truthy value).
SELF_METADATA_KEY = "tracing_eval"
#: Short, id-like OTel attributes Langfuse keeps in observation metadata; copied onto the span.
_METADATA_ATTRIBUTES = {
    "gen_ai.tool.name": ("gen_ai.tool.name",),
    "gen_ai.tool.call.id": ("gen_ai.tool.call.id", "tool_call_id"),
    "gen_ai.response.id": ("gen_ai.response.id",),
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FRACTION = re.compile(r"(\.\d{1,6})\d*")

Row = Mapping[str, Any]


# -- time ---------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """An aware datetime from an ISO 8601 string (any fraction length, `Z` or offset) or a datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    text = _FRACTION.sub(lambda m: m[1], value.strip().replace("Z", "+00:00"), count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def to_ns(value: Any) -> int:
    """Nanoseconds since the epoch of a time value; 0 when absent or unreadable."""
    parsed = parse_time(value)
    if parsed is None:
        return 0
    delta = parsed - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


def iso(value: datetime | int) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, as Langfuse writes times."""
    moment = from_ns(value) if isinstance(value, int) else value.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- traces -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceInfo:
    """What the filters and the thread key need to know about one trace."""

    trace_id: str
    session_id: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    environment: str | None = None
    user_id: str | None = None
    release: str | None = None
    self_traffic: bool = False

    @property
    def thread_key(self) -> str:
        return thread_key(SOURCE, self.session_id, self.trace_id)


@dataclass(frozen=True)
class ReadFilter:
    """Which traces the source keeps: environment, tags (all), trace names (any), sample, not our own."""

    environments: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    trace_names: frozenset[str] = frozenset()
    sample_rate: float = 1.0

    @classmethod
    def from_settings(cls, settings: LangfuseSettings) -> ReadFilter:
        return cls(
            frozenset(settings.environments),
            frozenset(settings.tags),
            frozenset(settings.trace_names),
            settings.sample_rate,
        )

    def keep(self, info: TraceInfo) -> bool:
        if info.self_traffic:
            return False
        if self.environments and info.environment not in self.environments:
            return False
        if not self.tags <= set(info.tags):
            return False
        if self.trace_names and info.name not in self.trace_names:
            return False
        return is_sampled(info.thread_key, self.sample_rate)


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _marked(metadata: Any) -> bool:
    """Metadata `tracing_eval` set to anything but false (v4 returns metadata values as strings)."""
    if not isinstance(metadata, Mapping):
        return False
    value = metadata.get(SELF_METADATA_KEY)
    return bool(value) and str(value).strip().lower() not in ("false", "0", "no", "none", "null")


def is_self_traffic(
    *, tags: Iterable[str] = (), names: Iterable[str | None] = (), metadata: Iterable[Any] = (), marker: str
) -> bool:
    """The worker's own judge traffic: tagged `marker`, a name starting with it, or metadata `tracing_eval`."""
    return (
        marker in set(tags)
        or any(isinstance(n, str) and n.startswith(marker) for n in names)
        or any(map(_marked, metadata))
    )


def trace_info_v4(rows: Sequence[Row], marker: str = SELF_MARKER) -> TraceInfo:
    """Trace facts from its v2 observation rows (trace context is denormalised onto every row)."""
    is_root = [not r.get("parentObservationId") or bool(r.get("isRootObservation")) for r in rows]
    roots = [r for r, root in zip(rows, is_root, strict=True) if root]
    ordered = [*roots, *(r for r, root in zip(rows, is_root, strict=True) if not root)]

    def first(key: str) -> Any:
        return next((r[key] for r in ordered if r.get(key) not in (None, "", [])), None)

    tags = tuple(t for t in (first("tags") or ()) if isinstance(t, str))
    name = _text(first("traceName"))
    return TraceInfo(
        trace_id=str(rows[0]["traceId"]),
        session_id=_text(first("sessionId")),
        name=name,
        tags=tags,
        environment=_text(first("environment")),
        user_id=_text(first("userId")),
        release=_text(first("release")),
        self_traffic=is_self_traffic(
            tags=tags,
            names=[name, *(r.get("name") for r in roots)],
            metadata=[r.get("metadata") for r in rows],
            marker=marker,
        ),
    )


def trace_info_v3(trace: Row, marker: str = SELF_MARKER) -> TraceInfo:
    """Trace facts from a v3 `Trace` (list or detail form)."""
    tags = tuple(t for t in (trace.get("tags") or ()) if isinstance(t, str))
    name = _text(trace.get("name"))
    observations = [o for o in trace.get("observations") or () if isinstance(o, Mapping)]
    return TraceInfo(
        trace_id=str(trace["id"]),
        session_id=_text(trace.get("sessionId")),
        name=name,
        tags=tags,
        environment=_text(trace.get("environment")),
        user_id=_text(trace.get("userId")),
        release=_text(trace.get("release")),
        self_traffic=is_self_traffic(
            tags=tags,
            names=[name],
            metadata=[trace.get("metadata"), *(o.get("metadata") for o in observations)],
            marker=marker,
        ),
    )


# -- observations -------------------------------------------------------------------------------


def io_text(value: Any) -> str | None:
    """Observation input/output as the JSON text OTel ingestion carries: v4 strings stay as they are."""
    if value is None:
        return None
    return value if isinstance(value, str) else dumps(value)


def _trace_attributes(info: TraceInfo) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if info.session_id:
        attrs["langfuse.session.id"] = info.session_id
    if info.name:
        attrs["langfuse.trace.name"] = info.name
    if info.tags:
        attrs["langfuse.trace.tags"] = list(info.tags)
    if info.environment:
        attrs["langfuse.environment"] = info.environment
    if info.user_id:
        attrs["langfuse.user.id"] = info.user_id
    if info.release:
        attrs["langfuse.release"] = info.release
    return attrs


def _metadata_attributes(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        return {}
    nested = metadata.get("attributes")
    sources = [metadata, nested] if isinstance(nested, Mapping) else [metadata]
    found: dict[str, Any] = {}
    for attribute, keys in _METADATA_ATTRIBUTES.items():
        values = (source.get(key) for source in sources for key in keys)
        value = next((v for v in values if isinstance(v, str) and v.strip()), None)
        if value is not None:
            found[attribute] = value
    return found


def observation_span(row: Row, info: TraceInfo) -> Span:
    """One Langfuse observation (v2 row or v3 `ObservationsView`) as a canonical span."""
    level = _text(row.get("level"))
    status_message = _text(row.get("statusMessage"))
    attrs: dict[str, Any] = {**_metadata_attributes(row.get("metadata")), **_trace_attributes(info)}
    attrs["langfuse.observation.type"] = str(row.get("type") or "SPAN").lower()
    for key, value in (
        ("langfuse.observation.input", io_text(row.get("input"))),
        ("langfuse.observation.output", io_text(row.get("output"))),
        ("langfuse.observation.level", level),
        ("langfuse.observation.status_message", status_message),
        ("langfuse.observation.model.name", _text(row.get("providedModelName")) or _text(row.get("model"))),
    ):
        if value is not None:
            attrs[key] = value
    usage = row.get("usageDetails")
    if isinstance(usage, Mapping) and usage:
        attrs["langfuse.observation.usage_details"] = dict(usage)
    is_error = (level or "").upper() == "ERROR"
    return Span(
        trace_id=str(row.get("traceId") or info.trace_id),
        span_id=str(row["id"]),
        parent_id=_text(row.get("parentObservationId")),
        name=str(row.get("name") or ""),
        start_ns=to_ns(row.get("startTime")),
        end_ns=to_ns(row.get("endTime")),
        status="error" if is_error else "unset",
        status_message=(status_message or "ERROR") if is_error else "",
        attributes=attrs,
        scope="langfuse",
    )


def group_by_trace(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """v2 observation rows by trace id, in the order first seen."""
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.get("traceId"):
            grouped[str(row["traceId"])].append(row)
    return dict(grouped)


def v4_trace_spans(rows: Sequence[Row], info: TraceInfo) -> list[Span]:
    """The spans of one trace from its v2 observation rows."""
    return [observation_span(r, info) for r in rows]


def v3_trace_spans(trace: Row, info: TraceInfo) -> list[Span]:
    """The spans of one v3 trace (`TraceWithFullDetails`), with a virtual root when the trace's own
    input/output are not those of a single top-level observation."""
    observations = [o for o in trace.get("observations") or () if isinstance(o, Mapping)]
    spans = [observation_span({**o, "traceId": info.trace_id}, info) for o in observations]
    ids = {s.span_id for s in spans}
    top = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    trace_in, trace_out = io_text(trace.get("input")), io_text(trace.get("output"))
    if trace_in is None and trace_out is None:
        return spans
    if len(top) == 1:
        attrs = top[0].attributes
        if (attrs.get("langfuse.observation.input"), attrs.get("langfuse.observation.output")) == (trace_in, trace_out):
            return spans
    root_id = VIRTUAL_ROOT_PREFIX + info.trace_id
    start = to_ns(trace.get("timestamp"))
    starts = [s.start_ns for s in spans if s.start_ns]
    attrs = {**_trace_attributes(info), "langfuse.observation.type": "span"}
    if trace_in is not None:
        attrs["langfuse.trace.input"] = trace_in
    if trace_out is not None:
        attrs["langfuse.trace.output"] = trace_out
    if _marked(trace.get("metadata")):
        attrs["langfuse.trace.metadata." + SELF_METADATA_KEY] = True
    root = Span(
        trace_id=info.trace_id,
        span_id=root_id,
        name=info.name or "trace",
        start_ns=min([start, *starts]) if start else min(starts, default=0),
        end_ns=max((s.end_ns for s in spans), default=0),
        attributes=attrs,
        scope="langfuse",
    )
    for span in top:
        span.parent_id = root_id
    return [root, *spans]


# -- what was already read ------------------------------------------------------------------------


def fingerprint(span: Span) -> str:
    """A short digest of everything a span says; equal digests need no re-ingest."""
    return hashlib.blake2b(span.model_dump_json().encode(), digest_size=8).hexdigest()


def trace_root(spans: Sequence[Span]) -> Span | None:
    """The root the assembly uses for a turn: the earliest span whose parent is not in the trace."""
    if not spans:
        return None
    ids = {s.span_id for s in spans}
    ordered = sorted(spans, key=lambda s: s.start_ns)
    return next((s for s in ordered if not s.parent_id or s.parent_id not in ids), ordered[0])


def is_virtual(observation_id: str | None) -> bool:
    return not observation_id or observation_id.startswith(VIRTUAL_ROOT_PREFIX)
