"""Data model of the fake Langfuse server: seeded traces/observations, scores, configs, queues.

Seeded data is stored once and rendered into each generation's views: v4's `ObservationV2`
(field groups, io as raw JSON strings) and v3's `Trace`/`TraceWithDetails`/
`TraceWithFullDetails`/`Session`. Scores are rendered as `ScoreV3` (both generations) and
`ScoreV1` (inside v3 trace details). Timestamps are rendered like Langfuse does
(`2026-11-30T12:00:00.000Z`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

Json = dict[str, Any]

V2_FIELD_GROUPS = ("core", "basic", "time", "io", "metadata", "model", "usage", "prompt", "metrics", "trace_context")
V3_TRACE_FIELD_GROUPS = ("core", "io", "scores", "observations", "metrics")
V3_SCORE_FIELD_GROUPS = ("details", "subject", "annotation")
METADATA_TRUNCATE = 200


def iso(ts: datetime | None) -> str | None:
    """Langfuse's timestamp format: UTC, milliseconds, `Z`."""
    if ts is None:
        return None
    ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def parse_ts(value: str) -> datetime:
    """Parse an ISO 8601 timestamp; naive values are taken as UTC."""
    ts = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def stable_hex(*parts: object, length: int = 32) -> str:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:length]


def count_tokens(text: Any) -> int:
    """Deterministic token count: words and punctuation of the JSON/text."""
    s = text if isinstance(text, str) else json.dumps(text)
    return len(re.findall(r"\w+|[^\w\s]", s or ""))


@dataclass
class Observation:
    """One observation (span, generation, tool, ...) of a seeded trace."""

    id: str
    trace_id: str
    type: str
    name: str
    start_time: datetime
    end_time: datetime | None
    parent_observation_id: str | None = None
    input: Any = None
    output: Any = None
    level: str = "DEFAULT"
    status_message: str | None = None
    model: str | None = None
    model_parameters: Json | None = None
    usage_details: dict[str, int] | None = None
    cost_details: dict[str, float] | None = None
    metadata: Json = field(default_factory=dict)
    completion_start_time: datetime | None = None
    version: str | None = None

    @property
    def is_root(self) -> bool:
        return self.parent_observation_id is None


@dataclass
class Trace:
    """A seeded trace: one conversation turn with its observations (root first)."""

    id: str
    name: str
    timestamp: datetime
    session_id: str | None
    user_id: str | None
    environment: str
    tags: list[str]
    observations: list[Observation]
    visible_at: datetime
    release: str | None = None
    version: str | None = None
    metadata: Json = field(default_factory=dict)
    public: bool = False
    bookmarked: bool = False

    @property
    def root(self) -> Observation | None:
        return next((o for o in self.observations if o.is_root), None)

    @property
    def input(self) -> Any:
        return self.root.input if self.root else None

    @property
    def output(self) -> Any:
        return self.root.output if self.root else None

    @property
    def latency(self) -> float:
        ends = [o.end_time or o.start_time for o in self.observations]
        starts = [o.start_time for o in self.observations]
        return (max(ends) - min(starts)).total_seconds() if starts else 0.0

    @property
    def total_cost(self) -> float:
        return round(sum((o.cost_details or {}).get("total", 0.0) for o in self.observations), 8)


@dataclass
class ScoreRow:
    """A stored score row (after the generation's upsert rule was applied)."""

    id: str
    name: str
    data_type: str
    value: float | None
    string_value: str | None
    timestamp: datetime
    created_at: datetime
    updated_at: datetime
    source: str = "API"
    trace_id: str | None = None
    observation_id: str | None = None
    session_id: str | None = None
    dataset_run_id: str | None = None
    comment: str | None = None
    metadata: Json | None = None
    config_id: str | None = None
    queue_id: str | None = None
    environment: str = "default"
    author_user_id: str | None = None
    via: str = "scores"  # "scores" (POST /scores) or "ingestion" (score-create event)
    visible_at: datetime | None = None  # readable from then on (`score_read_lag`)

    @property
    def key(self) -> tuple[str, str, str]:
        """ClickHouse ordering key that decides replacement: (date of timestamp, name, id)."""
        return (self.timestamp.astimezone(UTC).date().isoformat(), self.name, self.id)

    @property
    def typed_value(self) -> float | bool | str | None:
        """The value as the v3 read API types it (number, boolean or string)."""
        if self.data_type == "NUMERIC":
            return self.value
        if self.data_type == "BOOLEAN":
            return bool(self.value)
        return self.string_value


@dataclass
class ScoreWrite:
    """One accepted score write (before upsert), as the connector sent it."""

    endpoint: str  # "POST /api/public/scores" or "POST /api/public/ingestion"
    body: Json
    score_id: str
    timestamp: datetime
    received_at: datetime
    replaced: bool  # True when it replaced an existing row with the same key


@dataclass
class ScoreConfigRow:
    id: str
    name: str
    data_type: str
    created_at: datetime
    updated_at: datetime
    is_archived: bool = False
    min_value: float | None = None
    max_value: float | None = None
    categories: list[Json] | None = None
    description: str | None = None


@dataclass
class QueueRow:
    id: str
    name: str
    description: str | None
    score_config_ids: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass
class QueueItemRow:
    id: str
    queue_id: str
    object_id: str
    object_type: str
    status: str
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None


@dataclass
class CommentRow:
    id: str
    object_type: str
    object_id: str
    content: str
    created_at: datetime
    updated_at: datetime
    author_user_id: str | None = None


# ---------------------------------------------------------------- seeding


@dataclass(frozen=True)
class SeedToolCall:
    """A tool call inside a seeded turn: the model asks for it, a TOOL observation runs it."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    result: Any = None


ToolCallLike = SeedToolCall | Mapping[str, Any] | tuple[Any, ...]
Turn = tuple[str, "str | None", "Sequence[ToolCallLike] | None", "str | None"]


def as_tool_call(tc: ToolCallLike) -> SeedToolCall:
    if isinstance(tc, SeedToolCall):
        return tc
    if isinstance(tc, Mapping):
        return SeedToolCall(str(tc["name"]), dict(tc.get("arguments") or {}), tc.get("result"))
    name, *rest = tc
    return SeedToolCall(str(name), dict(rest[0]) if rest else {}, rest[1] if len(rest) > 1 else None)


@dataclass
class SessionState:
    """What `add_trace_to_session` needs to continue a seeded conversation."""

    session_id: str
    environment: str
    tags: list[str]
    user_id: str | None
    model: str
    trace_name: str
    root_type: str
    system_prompt: str | None
    full_history: bool
    turn_gap: timedelta
    release: str | None
    history: list[Json] = field(default_factory=list)
    next_start: datetime | None = None
    turns: int = 0


def _cost(model_tokens: int, per_1k: float) -> float:
    return round(model_tokens * per_1k / 1000, 8)


def build_turn(
    state: SessionState,
    user_text: str,
    assistant_text: str | None,
    tool_calls: Sequence[ToolCallLike] | None,
    error: str | None,
    *,
    start: datetime,
    visible_at: datetime,
    metadata: Json | None = None,
) -> Trace:
    """One trace for one turn: root (SPAN/AGENT), GENERATION(s), TOOL observations.

    Root input/output are OpenAI-style message lists (`[{"role": "user", ...}]` /
    `[{"role": "assistant", ...}]`); with `full_history` the root input holds the whole
    conversation so far. Generations get the full prompt (system + history), their output is the
    assistant message dict (tool calls included), `model`, `modelParameters`, `usageDetails` and
    `costDetails`. An `error` marks the root and the last generation `level=ERROR` with
    `statusMessage=error`.
    """
    index = state.turns
    trace_id = stable_hex("trace", state.session_id, index)
    seq = iter(range(1000))

    def oid() -> str:
        return stable_hex("obs", trace_id, next(seq), length=16)

    calls = [as_tool_call(tc) for tc in tool_calls or ()]
    user_msg = {"role": "user", "content": user_text}
    prompt = ([{"role": "system", "content": state.system_prompt}] if state.system_prompt else []) + [
        *state.history,
        user_msg,
    ]
    root_id = oid()
    obs: list[Observation] = []
    t = start + timedelta(milliseconds=20)

    def generation(messages: list[Json], output: Json | None, failed: bool) -> Observation:
        nonlocal t
        n_in = sum(count_tokens(m.get("content") or "") + 1 for m in messages)
        n_out = count_tokens(output) if output else 0
        began, first, t = t, t + timedelta(milliseconds=180), t + timedelta(milliseconds=600 + 10 * n_out)
        o = Observation(
            id=oid(),
            trace_id=trace_id,
            type="GENERATION",
            name="chat-completion",
            start_time=began,
            end_time=t,
            parent_observation_id=root_id,
            input=messages,
            output=output,
            model=state.model,
            model_parameters={"temperature": 0.2, "max_tokens": 512},
            usage_details={"input": n_in, "output": n_out, "total": n_in + n_out},
            cost_details={
                "input": _cost(n_in, 0.00015),
                "output": _cost(n_out, 0.0006),
                "total": round(_cost(n_in, 0.00015) + _cost(n_out, 0.0006), 8),
            },
            completion_start_time=first if output else None,
            level="ERROR" if failed else "DEFAULT",
            status_message=error if failed else None,
        )
        t += timedelta(milliseconds=20)
        return o

    messages = list(prompt)
    if calls:
        call_msgs = [
            {
                "id": f"call_{stable_hex(trace_id, i, c.name, length=20)}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for i, c in enumerate(calls)
        ]
        asked = {"role": "assistant", "content": None, "tool_calls": call_msgs}
        obs.append(generation(messages, asked, failed=False))
        messages = [*messages, asked]
        for c, cm in zip(calls, call_msgs, strict=True):
            began, t = t, t + timedelta(milliseconds=150)
            obs.append(
                Observation(
                    id=oid(),
                    trace_id=trace_id,
                    type="TOOL",
                    name=c.name,
                    start_time=began,
                    end_time=t,
                    parent_observation_id=root_id,
                    input=dict(c.arguments),
                    output=c.result,
                    metadata={"tool_call_id": cm["id"]},
                )
            )
            content = c.result if isinstance(c.result, str) else json.dumps(c.result)
            messages.append({"role": "tool", "tool_call_id": cm["id"], "content": content})
            t += timedelta(milliseconds=10)
    answer = {"role": "assistant", "content": assistant_text} if assistant_text is not None else None
    obs.append(generation(messages, answer, failed=error is not None))
    end = t + timedelta(milliseconds=20)

    root_input = [*state.history, user_msg] if state.full_history else [user_msg]
    root = Observation(
        id=root_id,
        trace_id=trace_id,
        type=state.root_type,
        name=state.trace_name,
        start_time=start,
        end_time=end,
        input=root_input,
        output=[answer] if answer else None,
        level="ERROR" if error else "DEFAULT",
        status_message=error,
        metadata=dict(metadata or {}),
    )
    state.history += [user_msg] + ([answer] if answer else [])
    state.turns += 1
    return Trace(
        id=trace_id,
        name=state.trace_name,
        timestamp=start,
        session_id=state.session_id,
        user_id=state.user_id,
        environment=state.environment,
        tags=list(state.tags),
        observations=[root, *obs],
        visible_at=visible_at,
        release=state.release,
        metadata=dict(metadata or {}),
    )


# ---------------------------------------------------------------- v4 views


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _metadata_v4(metadata: Mapping[str, Any], expand: set[str]) -> dict[str, str]:
    """v4 stores metadata as string values; long ones are cut unless expanded."""
    out: dict[str, str] = {}
    for k, v in metadata.items():
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        out[k] = text if k in expand or len(text) <= METADATA_TRUNCATE else text[:METADATA_TRUNCATE]
    return out


def observation_v2(o: Observation, t: Trace, groups: set[str], project_id: str, expand: set[str]) -> Json:
    """`ObservationV2` with only the requested field groups (plus the always-present price keys)."""
    row: Json = {
        "id": o.id,
        "traceId": t.id,
        "startTime": iso(o.start_time),
        "endTime": iso(o.end_time),
        "projectId": project_id,
        "parentObservationId": o.parent_observation_id,
        "type": o.type,
        "modelId": None,
        "inputPrice": None,
        "outputPrice": None,
        "totalPrice": None,
    }
    if "basic" in groups:
        row |= {
            "isRootObservation": o.is_root,
            "name": o.name,
            "level": o.level,
            "statusMessage": o.status_message,
            "version": o.version,
            "environment": t.environment,
            "bookmarked": False,
            "public": t.public,
            "userId": t.user_id,
            "sessionId": t.session_id,
        }
    if "time" in groups:
        row |= {
            "completionStartTime": iso(o.completion_start_time),
            "createdAt": iso(o.start_time),
            "updatedAt": iso(o.end_time or o.start_time),
        }
    if "io" in groups:
        row |= {"input": _json_text(o.input), "output": _json_text(o.output)}
    if "metadata" in groups:
        row["metadata"] = _metadata_v4(o.metadata, expand)
    if "model" in groups:
        row |= {
            "providedModelName": o.model,
            "internalModelId": f"model-{o.model}" if o.model else None,
            "modelParameters": {k: str(v) for k, v in (o.model_parameters or {}).items()} if o.model else None,
            "modelId": f"model-{o.model}" if o.model else None,
            "inputPrice": "0.00000015" if o.model else None,
            "outputPrice": "0.0000006" if o.model else None,
            "totalPrice": None,
        }
    if "usage" in groups:
        cost = o.cost_details or {}
        row |= {
            "usageDetails": dict(o.usage_details or {}),
            "costDetails": dict(cost),
            "totalCost": cost.get("total", 0.0),
            "usagePricingTierName": "Standard" if o.model else None,
        }
    if "prompt" in groups:
        row |= {"promptId": None, "promptName": None, "promptVersion": None}
    if "metrics" in groups:
        latency = (o.end_time - o.start_time).total_seconds() if o.end_time else None
        ttft = (o.completion_start_time - o.start_time).total_seconds() if o.completion_start_time else None
        row |= {"latency": latency, "timeToFirstToken": ttft}
    if "trace_context" in groups:
        row |= {"traceName": t.name, "tags": list(t.tags), "release": t.release}
    return row


# ---------------------------------------------------------------- v3 views


def trace_v3(t: Trace) -> Json:
    """The plain `Trace` object (as inside `SessionWithTraces`)."""
    return {
        "id": t.id,
        "timestamp": iso(t.timestamp),
        "name": t.name,
        "input": t.input,
        "output": t.output,
        "sessionId": t.session_id,
        "release": t.release,
        "version": t.version,
        "userId": t.user_id,
        "metadata": t.metadata,
        "tags": list(t.tags),
        "public": t.public,
        "environment": t.environment,
    }


def trace_with_details(t: Trace, groups: set[str], project_id: str, score_ids: list[str]) -> Json:
    """`TraceWithDetails` (list form): excluded groups give `[]` and -1 like the server."""
    row = trace_v3(t)
    if "io" not in groups:
        row.pop("input")
        row.pop("output")
    row["htmlPath"] = f"/project/{project_id}/traces/{t.id}"
    row["observations"] = [o.id for o in t.observations] if "observations" in groups else []
    row["scores"] = list(score_ids) if "scores" in groups else []
    if "metrics" in groups:
        row |= {"latency": t.latency, "totalCost": t.total_cost}
    else:
        row |= {"latency": -1, "totalCost": -1}
    return row


def observation_view(o: Observation, t: Trace) -> Json:
    """`ObservationsView` (v1 observation with prices and metrics), io as JSON values."""
    usage = o.usage_details or {}
    cost = o.cost_details or {}
    latency = (o.end_time - o.start_time).total_seconds() if o.end_time else None
    ttft = (o.completion_start_time - o.start_time).total_seconds() if o.completion_start_time else None
    return {
        "id": o.id,
        "traceId": t.id,
        "type": o.type,
        "name": o.name,
        "startTime": iso(o.start_time),
        "endTime": iso(o.end_time),
        "completionStartTime": iso(o.completion_start_time),
        "model": o.model,
        "modelParameters": dict(o.model_parameters or {}),
        "input": o.input,
        "version": o.version,
        "metadata": dict(o.metadata),
        "output": o.output,
        "usage": {
            "input": usage.get("input", 0),
            "output": usage.get("output", 0),
            "total": usage.get("total", 0),
            "unit": "TOKENS" if o.model else None,
            "inputCost": cost.get("input"),
            "outputCost": cost.get("output"),
            "totalCost": cost.get("total"),
        },
        "level": o.level,
        "statusMessage": o.status_message,
        "parentObservationId": o.parent_observation_id,
        "promptId": None,
        "usageDetails": dict(usage),
        "costDetails": dict(cost),
        "environment": t.environment,
        "promptName": None,
        "promptVersion": None,
        "modelId": f"model-{o.model}" if o.model else None,
        "inputPrice": 0.00000015 if o.model else None,
        "outputPrice": 0.0000006 if o.model else None,
        "totalPrice": None,
        "calculatedInputCost": cost.get("input"),
        "calculatedOutputCost": cost.get("output"),
        "calculatedTotalCost": cost.get("total"),
        "latency": latency,
        "timeToFirstToken": ttft,
    }


def score_v1(s: ScoreRow) -> Json | None:
    """`ScoreV1` (trace scores inside `TraceWithFullDetails`); None for CORRECTION (not in v1)."""
    if s.data_type == "CORRECTION" or s.trace_id is None:
        return None
    row: Json = {
        "id": s.id,
        "traceId": s.trace_id,
        "name": s.name,
        "source": s.source,
        "observationId": s.observation_id,
        "timestamp": iso(s.timestamp),
        "createdAt": iso(s.created_at),
        "updatedAt": iso(s.updated_at),
        "authorUserId": s.author_user_id,
        "comment": s.comment,
        "metadata": s.metadata or {},
        "configId": s.config_id,
        "queueId": s.queue_id,
        "environment": s.environment,
        "dataType": s.data_type,
    }
    if s.data_type in ("NUMERIC", "BOOLEAN", "CATEGORICAL"):
        row["value"] = s.value if s.value is not None else 0
    if s.data_type != "NUMERIC":
        row["stringValue"] = s.string_value or ""
    return row


def score_v3(s: ScoreRow, groups: set[str], project_id: str) -> Json:
    """`ScoreV3` with core fields and the requested groups (details, subject, annotation)."""
    row: Json = {
        "id": s.id,
        "projectId": project_id,
        "name": s.name,
        "value": s.typed_value,
        "dataType": s.data_type,
        "source": s.source,
        "timestamp": iso(s.timestamp),
        "environment": s.environment,
        "createdAt": iso(s.created_at),
        "updatedAt": iso(s.updated_at),
    }
    if "details" in groups:
        row |= {"comment": s.comment, "configId": s.config_id, "metadata": s.metadata or {}}
    if "subject" in groups:
        if s.observation_id:
            row["subject"] = {"kind": "observation", "id": s.observation_id, "traceId": s.trace_id}
        elif s.trace_id:
            row["subject"] = {"kind": "trace", "id": s.trace_id}
        elif s.session_id:
            row["subject"] = {"kind": "session", "id": s.session_id}
        elif s.dataset_run_id:
            row["subject"] = {"kind": "experiment", "id": s.dataset_run_id}
    if "annotation" in groups:
        row |= {"authorUserId": s.author_user_id, "queueId": s.queue_id}
    return row


def score_config_json(c: ScoreConfigRow, project_id: str) -> Json:
    row: Json = {
        "id": c.id,
        "name": c.name,
        "createdAt": iso(c.created_at),
        "updatedAt": iso(c.updated_at),
        "projectId": project_id,
        "dataType": c.data_type,
        "isArchived": c.is_archived,
        "description": c.description,
    }
    if c.data_type == "NUMERIC":
        row |= {"minValue": c.min_value, "maxValue": c.max_value}
    if c.categories is not None:
        row["categories"] = [dict(x) for x in c.categories]
    return row


def queue_json(q: QueueRow) -> Json:
    return {
        "id": q.id,
        "name": q.name,
        "description": q.description,
        "scoreConfigIds": list(q.score_config_ids),
        "createdAt": iso(q.created_at),
        "updatedAt": iso(q.updated_at),
    }


def queue_item_json(i: QueueItemRow) -> Json:
    return {
        "id": i.id,
        "queueId": i.queue_id,
        "objectId": i.object_id,
        "objectType": i.object_type,
        "status": i.status,
        "completedAt": iso(i.completed_at),
        "createdAt": iso(i.created_at),
        "updatedAt": iso(i.updated_at),
    }


def comment_json(c: CommentRow, project_id: str) -> Json:
    return {
        "id": c.id,
        "projectId": project_id,
        "createdAt": iso(c.created_at),
        "updatedAt": iso(c.updated_at),
        "objectType": c.object_type,
        "objectId": c.object_id,
        "content": c.content,
        "authorUserId": c.author_user_id,
    }
