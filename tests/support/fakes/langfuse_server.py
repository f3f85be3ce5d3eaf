"""A fake Langfuse server on loopback that validates every exchange against the real OpenAPI spec.

Two generations (see `shared/reference/langfuse.md` (beside the repository) §1):

- `mode="v4"` — server v4.16 in `events_only` write mode, spec `langfuse-openapi-v4.16.yml`.
  Reads: `GET /api/public/v2/observations` (cursor, newest first), `GET /api/public/v3/scores`.
  The legacy reads (`/traces`, `/sessions`, v1 `/observations`, `/v2/scores`) answer 404.
  `POST /api/public/scores` takes ONE `CreateScoreRequest` object (answer 200 `{"id"}`), and the
  score timestamp is the server's clock. With `score_batches=True` it emulates servers >= v4.59
  that SDK 5.x needs: a JSON list with per-item `timestamp`, answered 202 `{"message":
  "Accepted"}` or 207 `{"accepted", "rejected", "errors"}`. `/ingestion` accepts only
  `score-create` and `sdk-log` events.
- `mode="v3"` — server v3.225, spec `langfuse-openapi-v3.225.yml`. Reads: `GET /traces`,
  `GET /traces/{id}`, `GET /sessions`, `GET /sessions/{id}` (page-based), `GET /v3/scores`;
  `GET /v2/observations` answers 404 "... only available in a Langfuse v4 write mode".
  `POST /scores` takes one `legacyCreateScoreRequest` object.

Both: `GET /health` (no auth), `GET /projects`, `POST /ingestion` (`score-create`; always 207 with
per-event results), score configs, annotation queues and items, comments.

Every request is checked against the generation's spec (path, query, Basic auth, JSON body; create
bodies reject unknown fields) and against the server's own rules (one score target kind; value
fits `dataType`/config; name == config name; queue needs `scoreConfigIds`; config name <= 35
chars; body size limits; ...). A problem is recorded in `server.violations` ("METHOD /path:
reason") and answered with 400 (401 for auth, 404 for a missing config/queue written to, 413 for
size); ingestion events get their 400 inside the 207 (and are violations too). A 404 for reading
something that does not exist (a trace, a session, a queue) or for an endpoint the generation does
not have is an answer, not a violation. Every response the fake sends is checked against the spec
too (a mismatch is a violation and a 500). Tests end with `server.assert_no_violations()`.

Scores are upserted like ClickHouse's `ReplacingMergeTree` ordered by `(toDate(timestamp), name,
id)`: same id + same name + same UTC date of `timestamp` replaces the row, anything else adds a
row (so a retry with a different timestamp date duplicates). `timestamp` is the server clock for
`POST /scores` (v4.16, v3), the item's `timestamp` (or clock) with `score_batches`, and the event
envelope `timestamp` for `/ingestion`. Without `dataType`/config, a number is NUMERIC and a string
CATEGORICAL (the server infers it).

Seeded data (`seed_session`): one trace per turn, `turn_gap` apart; each trace has a root
observation (`root_type`, name `trace_name`, input `[{"role": "user", ...}]` — the whole history
with `full_history=True` — and output `[{"role": "assistant", ...}]`), a GENERATION (model,
modelParameters, usageDetails/costDetails; input = the full prompt incl. system message, output =
the assistant message dict), and for tool calls: GENERATION asking for them, one TOOL
observation per call (input = arguments, output = result), a final GENERATION. An `error` sets
`level=ERROR` + `statusMessage` on the root and the last GENERATION (output None when the
assistant text is None). v4 returns io as raw JSON strings and metadata values as strings
(truncated to 200 chars unless `expandMetadata`); v3 returns io as JSON. Trace ids are 32 hex
chars derived from (session id, turn index), so both modes give the same ids. A v3 session's
`createdAt` is its first trace's timestamp, so `GET /sessions?fromTimestamp=` does not find old
sessions that grew later (like the real server). On v4, a `filter` JSON parameter replaces the
simple filter parameters (documented server behaviour).

Import with `from tests.support.fakes.langfuse_server import FakeLangfuseServer, SeedToolCall`.

Usage::

    with FakeLangfuseServer("v4") as lf:
        lf.seed_session("s1", [("hi", "hello!", None, None),
                               ("where is my order?", "It ships today.",
                                [SeedToolCall("lookup_order", {"id": 7}, {"status": "packed"})], None)])
        client = AsyncLangfuseAPI(base_url=lf.base_url, username=lf.public_key, password=lf.secret_key)
        ...
        lf.assert_no_violations()

Public API of `FakeLangfuseServer(mode="v4", *, public_key="pk-lf-test", secret_key="sk-lf-test",
project_id="fake-project", score_batches=False, score_read_lag=0.0, require_time_window=False,
host="127.0.0.1", port=0)`. `score_read_lag` delays when written scores show up in reads (Langfuse's
non-OTel paths lag); `require_time_window` makes a v2 observations read without both
`fromStartTime` and `toStartTime` a violation (the reference's design rule, not a server rule).

- lifecycle: `start()`/`stop()` or `with`; `base_url` (e.g. `http://127.0.0.1:PORT`, no path),
  `auth` (`(public_key, secret_key)` for httpx), `version` (what `/health` reports).
- clock: `now()`, `advance(seconds)`, `set_now(dt)` — the server's clock (real time + offset)
  used for score timestamps, `visible_after` and `createdAt` fields.
- seeding: `seed_session(session_id, turns, *, environment="default", tags=(), start=None,
  user_id=None, model="gpt-4o-mini", trace_name="chat-turn", root_type="SPAN",
  system_prompt=..., full_history=False, turn_gap=timedelta(seconds=30), release=None,
  visible_after=0.0, metadata=None) -> list[Trace]` where a turn is `(user_text, assistant_text |
  None, tool_calls | None, error | None)` and a tool call is a `SeedToolCall(name, arguments,
  result)`, a dict with those keys or a tuple; `add_trace_to_session(session_id, user_text,
  assistant_text, tool_calls=None, error=None, *, at=None, visible_after=0.0, metadata=None)
  -> Trace`; `seed_score(...)`, `seed_score_config(...)`, `seed_queue(...)` put rows in place
  without a request. `traces` (all seeded traces).
- faults: `fail_next(n=1, status=429, retry_after=2.0, *, path=None)`, `hang_next(n=1,
  seconds=30.0, *, path=None)`, `set_failure_rate(rate, *, seed=0, statuses=(429, 500, 503),
  retry_after=1.0, path=None)`; `path` is a prefix such as "/api/public/scores" (None: every
  endpoint but `/health`). Injected failures are not violations.
- inspection (copies, thread-safe): `scores` (current rows, `ScoreRow`), `score_requests`
  (every accepted write, `ScoreWrite`), `score_configs`, `queues`, `queue_items`, `comments`,
  `requests` (`Exchange`: method, path, query, headers, body, status, response, endpoint),
  `counts()` (`{"GET /api/public/v2/observations": 3, ...}` by route template), `count(endpoint)`,
  `violations`, `assert_no_violations()`, `take_violations()` (return and clear); `reset()`
  forgets everything (for a module-scoped server shared by several tests).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.fakes.loopback import LoopbackServer

from .langfuse_data import (
    V2_FIELD_GROUPS,
    V3_SCORE_FIELD_GROUPS,
    V3_TRACE_FIELD_GROUPS,
    CommentRow,
    Json,
    Observation,
    QueueItemRow,
    QueueRow,
    ScoreConfigRow,
    ScoreRow,
    ScoreWrite,
    SeedToolCall,
    SessionState,
    ToolCallLike,
    Trace,
    Turn,
    build_turn,
    comment_json,
    iso,
    observation_v2,
    observation_view,
    parse_ts,
    queue_item_json,
    queue_json,
    score_config_json,
    score_v1,
    score_v3,
    trace_v3,
    trace_with_details,
)
from .langfuse_spec import spec_checker

__all__ = [
    "Exchange",
    "FakeLangfuseServer",
    "Observation",
    "QueueItemRow",
    "QueueRow",
    "CommentRow",
    "ScoreConfigRow",
    "ScoreRow",
    "ScoreWrite",
    "SeedToolCall",
    "Trace",
]

Mode = Literal["v4", "v3"]
VERSIONS = {"v4": "4.16.0", "v3": "3.225.4"}
V2_ONLY_MESSAGE = (
    "The v2 observations API is only available in a Langfuse v4 write mode. "
    "Set LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN to enable it."
)
V4_LEGACY_MESSAGE = (
    "This endpoint is not available in Langfuse v4 (events_only write mode). "
    "Read observations via GET /api/public/v2/observations and scores via GET /api/public/v3/scores."
)
_ENV = re.compile(r"^(?!langfuse)[a-z0-9_-]+$")
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9_ .()\-]+$")
_EVENTS_ONLY_TYPES = ("score-create", "sdk-log")
# Next.js body parser limits: default 1 MiB (POST /scores), "4.5mb" for /ingestion.
BODY_LIMITS = {"/api/public/ingestion": int(4.5 * 1024 * 1024)}
DEFAULT_BODY_LIMIT = 1024 * 1024


class ApiError(Exception):
    """A non-2xx answer from a handler; `violation` marks it as the client's mistake."""

    def __init__(self, status: int, message: str, *, violation: bool = True, error: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.violation = status, message, violation
        self.error = error or {400: "InvalidRequestError", 401: "UnauthorizedError", 404: "LangfuseNotFoundError"}.get(
            status, "Error"
        )


@dataclass
class Exchange:
    """One request the fake received and what it answered."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any
    received_at: float
    endpoint: str | None = None  # "METHOD /route/template" when the route is known
    status: int = 0
    response: Any = None
    violations: list[str] = field(default_factory=list)


@dataclass
class _Fault:
    kind: Literal["fail", "hang"]
    remaining: int
    path: str | None
    status: int = 429
    retry_after: float = 2.0
    seconds: float = 0.0


@dataclass
class _Ctx:
    """What a handler gets: path parameters, query pairs, parsed JSON body, the exchange."""

    params: dict[str, str]
    query: list[tuple[str, str]]
    body: Any
    exchange: Exchange

    def q(self, name: str) -> str | None:
        return next((v for k, v in self.query if k == name), None)

    def qall(self, name: str) -> list[str]:
        return [v for k, v in self.query if k == name]

    def qint(self, name: str, default: int) -> int:
        v = self.q(name)
        return default if v is None or v == "" else int(v)

    def qcsv(self, name: str) -> list[str]:
        v = self.q(name)
        return [x.strip() for x in v.split(",") if x.strip()] if v else []

    def qbool(self, name: str) -> bool | None:
        v = self.q(name)
        return None if v is None else v.lower() == "true"

    def qts(self, name: str) -> datetime | None:
        v = self.q(name)
        return parse_ts(v) if v else None


Handler = Callable[[_Ctx], Awaitable[tuple[int, Any]]]


@dataclass
class _Route:
    method: str
    template: str
    regex: re.Pattern[str]
    handler: Handler
    modes: tuple[str, ...] = ("v4", "v3")
    gone_in: dict[str, str] = field(default_factory=dict)  # mode -> 404 message (endpoint absent there)


def _b64(data: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def _unb64(cursor: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise ApiError(400, f"Invalid cursor: {cursor!r}") from exc


def _page(ctx: _Ctx, total: int) -> tuple[int, int, Json]:
    """Page-based pagination (`page` from 1, `limit` 1..100, default 50) and its `meta`."""
    page, limit = ctx.qint("page", 1), ctx.qint("limit", 50)
    if page < 1:
        raise ApiError(400, "page must be >= 1")
    if not 1 <= limit <= 100:
        raise ApiError(400, f"limit must be between 1 and 100, got {limit}")
    meta = {"page": page, "limit": limit, "totalItems": total, "totalPages": math.ceil(total / limit)}
    return (page - 1) * limit, limit, meta


class FakeLangfuseServer:
    """Langfuse's public REST API (v4 or v3 generation) on 127.0.0.1 in a background thread."""

    def __init__(
        self,
        mode: Mode = "v4",
        *,
        public_key: str = "pk-lf-test",
        secret_key: str = "sk-lf-test",
        project_id: str = "fake-project",
        score_batches: bool = False,
        score_read_lag: float = 0.0,
        require_time_window: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if mode not in ("v4", "v3"):
            raise ValueError(f"mode must be 'v4' or 'v3', not {mode!r}")
        self.mode: Mode = mode
        self.public_key, self.secret_key, self.project_id = public_key, secret_key, project_id
        self.score_batches = score_batches
        self.score_read_lag = score_read_lag
        self.require_time_window = require_time_window
        self.version = "4.59.0" if score_batches else VERSIONS[mode]
        self.host, self.port = host, port
        self.checker = spec_checker(mode, score_batches=score_batches)
        self._lock = threading.RLock()
        self._offset = timedelta(0)
        self._traces: dict[str, Trace] = {}
        self._sessions: dict[str, SessionState] = {}
        self._scores: list[ScoreRow] = []
        self.deleted_scores: list[str] = []  # ids removed with DELETE /scores/{scoreId}, in order
        self._score_writes: list[ScoreWrite] = []
        self._configs: dict[str, ScoreConfigRow] = {}
        self._queues: dict[str, QueueRow] = {}
        self._items: list[QueueItemRow] = []
        self._comments: list[CommentRow] = []
        self._exchanges: list[Exchange] = []
        self._violations: list[str] = []
        self._faults: list[_Fault] = []
        self._fail_rate = 0.0
        self._fail_rng = random.Random(0)
        self._fail_statuses: tuple[int, ...] = (429, 500, 503)
        self._fail_retry_after = 1.0
        self._fail_path: str | None = None
        self._fail_hang: tuple[float, float] = (0.0, 0.0)  # (share of failures that hang, seconds)
        self._routes = self._build_routes()
        self._http: LoopbackServer | None = None
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        self.app = Starlette(routes=[Route("/{path:path}", self._dispatch, methods=methods)])

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def auth(self) -> tuple[str, str]:
        return (self.public_key, self.secret_key)

    def start(self) -> FakeLangfuseServer:
        """Bind an ephemeral port (unless one was given) and serve until `stop()`."""
        self._http = LoopbackServer(self.app, self.host, self.port, name="fake-langfuse").start()
        self.port = self._http.port
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
        self._http = None

    def __enter__(self) -> FakeLangfuseServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------ clock

    def now(self) -> datetime:
        """The server's clock: wall time plus whatever `advance`/`set_now` added."""
        with self._lock:
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float | timedelta) -> None:
        """Move the server clock forward (e.g. past `visible_after`, or to another day)."""
        with self._lock:
            self._offset += seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)

    def set_now(self, when: datetime) -> None:
        with self._lock:
            self._offset = when - datetime.now(UTC)

    # ------------------------------------------------------------ seeding

    def seed_session(
        self,
        session_id: str,
        turns: Sequence[Turn],
        *,
        environment: str = "default",
        tags: Iterable[str] = (),
        start: datetime | None = None,
        user_id: str | None = None,
        model: str = "gpt-4o-mini",
        trace_name: str = "chat-turn",
        root_type: str = "SPAN",
        system_prompt: str | None = "You are a helpful customer support agent.",
        full_history: bool = False,
        turn_gap: timedelta = timedelta(seconds=30),
        release: str | None = None,
        visible_after: float = 0.0,
        metadata: Json | None = None,
    ) -> list[Trace]:
        """Create one trace per turn (root + generations + tools), `turn_gap` apart from `start`.

        `start` defaults to `(len(turns) + 1) * turn_gap` before the server clock. Data becomes
        readable `visible_after` seconds (server clock) from now — ingestion lag.
        """
        with self._lock:
            if start is None:
                start = self.now() - (len(turns) + 1) * turn_gap
            state = SessionState(
                session_id=session_id,
                environment=environment,
                tags=list(tags),
                user_id=user_id,
                model=model,
                trace_name=trace_name,
                root_type=root_type,
                system_prompt=system_prompt,
                full_history=full_history,
                turn_gap=turn_gap,
                release=release,
                next_start=start,
            )
            self._sessions[session_id] = state
            out = []
            for turn in turns:
                user_text, assistant_text, tool_calls, error = (tuple(turn) + (None, None, None))[:4]
                out.append(
                    self._add_turn(state, user_text, assistant_text, tool_calls, error, None, visible_after, metadata)
                )
            return out

    def add_trace_to_session(
        self,
        session_id: str,
        user_text: str,
        assistant_text: str | None,
        tool_calls: Sequence[ToolCallLike] | None = None,
        error: str | None = None,
        *,
        at: datetime | None = None,
        visible_after: float = 0.0,
        metadata: Json | None = None,
    ) -> Trace:
        """Grow a seeded session by one turn (at `at`, default `turn_gap` after the last one)."""
        with self._lock:
            state = self._sessions.get(session_id)
            if state is None:
                self.seed_session(session_id, [], start=at)
                state = self._sessions[session_id]
            return self._add_turn(state, user_text, assistant_text, tool_calls, error, at, visible_after, metadata)

    def _add_turn(
        self,
        state: SessionState,
        user_text: str,
        assistant_text: str | None,
        tool_calls: Sequence[ToolCallLike] | None,
        error: str | None,
        at: datetime | None,
        visible_after: float,
        metadata: Json | None,
    ) -> Trace:
        start = at or state.next_start or self.now()
        visible_at = self.now() + timedelta(seconds=visible_after)
        trace = build_turn(
            state, user_text, assistant_text, tool_calls, error, start=start, visible_at=visible_at, metadata=metadata
        )
        state.next_start = start + state.turn_gap
        self._traces[trace.id] = trace
        return trace

    def seed_score_config(
        self,
        name: str,
        data_type: str,
        *,
        categories: Sequence[Mapping[str, Any]] | None = None,
        min_value: float | None = None,
        max_value: float | None = None,
        description: str | None = None,
        is_archived: bool = False,
    ) -> ScoreConfigRow:
        """A score config created out of band (no validation, no request recorded)."""
        now = self.now()
        if data_type == "BOOLEAN" and categories is None:
            categories = [{"value": 1, "label": "True"}, {"value": 0, "label": "False"}]
        row = ScoreConfigRow(
            id=str(uuid.uuid4()),
            name=name,
            data_type=data_type,
            created_at=now,
            updated_at=now,
            is_archived=is_archived,
            min_value=min_value,
            max_value=max_value,
            categories=[dict(c) for c in categories] if categories is not None else None,
            description=description,
        )
        with self._lock:
            self._configs[row.id] = row
        return replace(row)

    def seed_queue(self, name: str, score_config_ids: Sequence[str], description: str | None = None) -> QueueRow:
        """An annotation queue created out of band."""
        now = self.now()
        row = QueueRow(str(uuid.uuid4()), name, description, list(score_config_ids), now, now)
        with self._lock:
            self._queues[row.id] = row
        return replace(row)

    def seed_score(self, name: str, value: float | str, **fields: Any) -> ScoreRow:
        """A score row put in place directly (e.g. an EVAL score); `fields` are `ScoreRow` fields."""
        now = self.now()
        data_type = fields.pop("data_type", "NUMERIC" if not isinstance(value, str) else "CATEGORICAL")
        numeric = None if isinstance(value, str) else float(value)
        string_value = value if isinstance(value, str) else ("True" if value else "False")
        if data_type == "NUMERIC":
            string_value = None
        row = ScoreRow(
            id=fields.pop("id", str(uuid.uuid4())),
            name=name,
            data_type=data_type,
            value=numeric if numeric is not None else 0.0,
            string_value=string_value,
            timestamp=fields.pop("timestamp", now),
            created_at=now,
            updated_at=now,
            **fields,
        )
        with self._lock:
            self._upsert(row)
        return replace(row)

    @property
    def traces(self) -> list[Trace]:
        with self._lock:
            return list(self._traces.values())

    # ------------------------------------------------------------ faults

    def fail_next(self, n: int = 1, status: int = 429, retry_after: float = 2.0, *, path: str | None = None) -> None:
        """The next `n` matching requests get `status` unprocessed.

        A 429 carries `Retry-After` (whole seconds, rounded up) and `X-RateLimit-*` like Cloud.
        """
        with self._lock:
            self._faults.append(_Fault("fail", n, path, status=status, retry_after=retry_after))

    def hang_next(self, n: int = 1, seconds: float = 30.0, *, path: str | None = None) -> None:
        """The next `n` matching requests wait `seconds` before being handled (client timeouts)."""
        with self._lock:
            self._faults.append(_Fault("hang", n, path, seconds=seconds))

    def set_failure_rate(
        self,
        rate: float,
        *,
        seed: int = 0,
        statuses: Sequence[int] = (429, 500, 503),
        retry_after: float = 1.0,
        path: str | None = None,
        hang_share: float = 0.0,
        hang_seconds: float = 30.0,
    ) -> None:
        """Fail a share `rate` of matching requests, reproducibly (`random.Random(seed)`): a share
        `hang_share` of those hang for `hang_seconds` (then are handled, if the client still waits),
        the others get one of `statuses` unprocessed."""
        with self._lock:
            self._fail_rate, self._fail_rng = rate, random.Random(seed)
            self._fail_statuses, self._fail_retry_after, self._fail_path = tuple(statuses), retry_after, path
            self._fail_hang = (hang_share, hang_seconds)

    # ------------------------------------------------------------ inspection

    @property
    def scores(self) -> list[ScoreRow]:
        """Current score rows (after upserts), in write order."""
        with self._lock:
            return [replace(s) for s in self._scores]

    @property
    def score_requests(self) -> list[ScoreWrite]:
        """Every accepted score write (one per score object or `score-create` event)."""
        with self._lock:
            return list(self._score_writes)

    @property
    def score_configs(self) -> list[ScoreConfigRow]:
        with self._lock:
            return [replace(c) for c in self._configs.values()]

    @property
    def queues(self) -> list[QueueRow]:
        with self._lock:
            return [replace(q) for q in self._queues.values()]

    @property
    def queue_items(self) -> list[QueueItemRow]:
        with self._lock:
            return [replace(i) for i in self._items]

    @property
    def comments(self) -> list[CommentRow]:
        with self._lock:
            return [replace(c) for c in self._comments]

    @property
    def requests(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    def counts(self) -> dict[str, int]:
        """Requests per endpoint, keyed "METHOD /api/public/route/{template}"."""
        with self._lock:
            return dict(Counter(e.endpoint or f"{e.method} {e.path}" for e in self._exchanges))

    def count(self, endpoint: str) -> int:
        return self.counts().get(endpoint, 0)

    @property
    def violations(self) -> list[str]:
        with self._lock:
            return list(self._violations)

    def take_violations(self) -> list[str]:
        """Return the violations so far and forget them (for tests that provoke some)."""
        with self._lock:
            out, self._violations = self._violations, []
            return out

    def assert_no_violations(self) -> None:
        problems = self.violations
        assert not problems, f"{len(problems)} Langfuse protocol violation(s):\n" + "\n".join(problems)

    def clear_requests(self) -> None:
        with self._lock:
            self._exchanges.clear()

    def reset(self) -> None:
        """Forget all data, faults, requests and violations and reset the clock (reuse a server)."""
        with self._lock:
            self._offset = timedelta(0)
            for store in (self._traces, self._sessions, self._configs, self._queues):
                store.clear()
            for log in (self._scores, self._score_writes, self._items, self._comments, self._exchanges):
                log.clear()
            self._violations.clear()
            self._faults.clear()
            self._fail_rate = 0.0

    # ------------------------------------------------------------ dispatch

    def _violate(self, ex: Exchange, reason: str) -> str:
        line = f"{ex.method} {ex.path}: {reason}"
        with self._lock:
            self._violations.append(line)
            ex.violations.append(line)
        return line

    def _take_fault(self, path: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                matches = path.startswith(f.path) if f.path else path != "/api/public/health"
                if matches and f.remaining > 0:
                    f.remaining -= 1
                    if f.remaining == 0:
                        self._faults.remove(f)
                    return replace(f)
            rate_matches = path.startswith(self._fail_path) if self._fail_path else path != "/api/public/health"
            if self._fail_rate > 0 and rate_matches and self._fail_rng.random() < self._fail_rate:
                hang_share, hang_seconds = self._fail_hang
                if self._fail_rng.random() < hang_share:
                    return _Fault("hang", 1, None, seconds=hang_seconds)
                status = self._fail_rng.choice(self._fail_statuses)
                return _Fault("fail", 1, None, status=status, retry_after=self._fail_retry_after)
        return None

    def _match(self, method: str, path: str) -> tuple[_Route | None, dict[str, str], bool]:
        """(route, path params, path known) for a request."""
        known = False
        for r in self._routes:
            m = r.regex.fullmatch(path)
            if m:
                known = True
                if r.method == method:
                    return r, m.groupdict(), True
        return None, {}, known

    def _authorized(self, request: Request) -> str | None:
        """None when Basic auth matches the keys, else the reason."""
        header = request.headers.get("authorization")
        if not header:
            return "missing Authorization header (Basic auth with public and secret key)"
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return f"Authorization scheme {scheme!r} is not Basic"
        try:
            user, _, password = base64.b64decode(token).decode().partition(":")
        except (ValueError, binascii.Error):
            return "Authorization header is not valid base64"
        if user != self.public_key or password != self.secret_key:
            return "invalid public/secret key"
        return None

    async def _dispatch(self, request: Request) -> Response:
        try:
            raw = await request.body()
        except ClientDisconnect:  # the client died mid-request (e.g. a replica killed on purpose)
            return Response(status_code=499)
        path, method = request.url.path, request.method
        query = list(request.query_params.multi_items())
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, bad_json = raw.decode(errors="replace"), True
        ex = Exchange(method, path, query, dict(request.headers), body, time.time())
        with self._lock:
            self._exchanges.append(ex)
        route, params, known = self._match(method, path)
        if route is not None:
            ex.endpoint = f"{method} {route.template}"

        fault = self._take_fault(path)
        if fault is not None and fault.kind == "hang":
            if not await _wait_unless_disconnected(request, fault.seconds):
                ex.status = 499
                return Response(status_code=499)
            fault = None
        if fault is not None:
            return self._fault_response(ex, fault)

        if route is None:
            if known:
                return self._answer(ex, 405, {"message": f"Method {method} not allowed"}, validate=False)
            in_spec = any(re.fullmatch(_template_regex(t), path) for t in self.checker.spec["paths"])
            reason = "endpoint not implemented by the fake" if in_spec else "unknown endpoint (not in the spec)"
            self._violate(ex, reason)
            return self._answer(ex, 501 if in_spec else 404, {"message": reason}, validate=False)

        if path != "/api/public/health":
            problem = self._authorized(request)
            if problem is not None:
                self._violate(ex, f"401 {problem}")
                return self._answer(ex, 401, {"message": f"Unauthorized: {problem}"}, validate=False)

        gone = route.gone_in.get(self.mode)
        if gone is not None:
            return self._answer(ex, 404, {"message": gone, "error": "LangfuseNotFoundError"})

        limit = BODY_LIMITS.get(path, DEFAULT_BODY_LIMIT)
        if len(raw) > limit:
            self._violate(ex, f"413 request body of {len(raw)} bytes exceeds the server's {limit}-byte limit")
            return self._answer(ex, 413, {"message": f"Body exceeded {limit} bytes limit"}, validate=False)
        if bad_json:
            self._violate(ex, "request body is not valid JSON")
            return self._answer(ex, 400, {"message": "Invalid JSON body"}, validate=False)
        headers = {k: v for k, v in request.headers.items()}
        problems = self.checker.check_request(method, path, query, headers, raw, request.headers.get("content-type"))
        if problems:
            for p in problems:
                self._violate(ex, f"spec: {p}")
            return self._answer(ex, 400, {"message": "Invalid request data", "error": problems})

        ctx = _Ctx(params, query, body, ex)
        try:
            status, payload = await route.handler(ctx)
        except ApiError as err:
            if err.violation:
                self._violate(ex, f"{err.status} {err.message}")
            return self._answer(ex, err.status, {"message": err.message, "error": err.error})
        return self._answer(ex, status, payload)

    def _answer(self, ex: Exchange, status: int, payload: Any, *, validate: bool = True) -> Response:
        data = json.dumps(payload).encode()
        if validate:
            template = ex.endpoint.split(" ", 1)[1] if ex.endpoint else ex.path
            problems = self.checker.check_response(ex.method, template, status, payload)
            if problems:
                for p in problems:
                    self._violate(ex, f"response {status} does not match the spec (fake bug): {p}")
                status, payload = 500, {"message": "fake produced a response that violates the spec", "error": problems}
                data = json.dumps(payload).encode()
        ex.status, ex.response = status, payload
        if status == 204:
            return Response(status_code=204)
        return Response(data, status_code=status, media_type="application/json")

    def _fault_response(self, ex: Exchange, fault: _Fault) -> Response:
        headers: dict[str, str] = {}
        if fault.status == 429:
            seconds = math.ceil(fault.retry_after)  # delay-seconds is an integer (RFC 9110)
            headers = {
                "Retry-After": str(seconds),
                "X-RateLimit-Limit": "30",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(int(time.time()) + seconds),
            }
            payload = {"message": "Rate limit exceeded", "error": "TooManyRequests"}
        else:
            payload = {"message": f"Injected failure {fault.status}", "error": "InternalServerError"}
        ex.status, ex.response = fault.status, payload
        return JSONResponse(payload, status_code=fault.status, headers=headers)

    # ------------------------------------------------------------ routes

    def _build_routes(self) -> list[_Route]:
        v4_gone = {"v4": V4_LEGACY_MESSAGE}
        table: list[tuple[str, str, Handler, dict[str, str]]] = [
            ("GET", "/api/public/health", self._health, {}),
            ("GET", "/api/public/projects", self._projects, {}),
            ("GET", "/api/public/v2/observations", self._observations_v2, {"v3": V2_ONLY_MESSAGE}),
            ("GET", "/api/public/v3/scores", self._scores_v3, {}),
            ("GET", "/api/public/traces", self._traces_list, v4_gone),
            ("GET", "/api/public/traces/{traceId}", self._trace_get, v4_gone),
            ("GET", "/api/public/sessions", self._sessions_list, v4_gone),
            ("GET", "/api/public/sessions/{sessionId}", self._session_get, v4_gone),
            ("GET", "/api/public/observations", self._not_in_fake, v4_gone),
            ("GET", "/api/public/v2/scores", self._not_in_fake, v4_gone),
            ("POST", "/api/public/scores", self._scores_create, {}),
            ("DELETE", "/api/public/scores/{scoreId}", self._score_delete, {}),
            ("POST", "/api/public/ingestion", self._ingestion, {}),
            ("GET", "/api/public/score-configs", self._configs_list, {}),
            ("POST", "/api/public/score-configs", self._configs_create, {}),
            ("GET", "/api/public/score-configs/{configId}", self._config_get, {}),
            ("PATCH", "/api/public/score-configs/{configId}", self._config_update, {}),
            ("GET", "/api/public/annotation-queues", self._queues_list, {}),
            ("POST", "/api/public/annotation-queues", self._queues_create, {}),
            ("GET", "/api/public/annotation-queues/{queueId}", self._queue_get, {}),
            ("GET", "/api/public/annotation-queues/{queueId}/items", self._items_list, {}),
            ("POST", "/api/public/annotation-queues/{queueId}/items", self._items_create, {}),
            ("GET", "/api/public/annotation-queues/{queueId}/items/{itemId}", self._item_get, {}),
            ("PATCH", "/api/public/annotation-queues/{queueId}/items/{itemId}", self._item_update, {}),
            ("DELETE", "/api/public/annotation-queues/{queueId}/items/{itemId}", self._item_delete, {}),
            ("GET", "/api/public/comments", self._comments_list, {}),
            ("POST", "/api/public/comments", self._comments_create, {}),
            ("GET", "/api/public/comments/{commentId}", self._comment_get, {}),
        ]
        return [_Route(m, t, re.compile(_template_regex(t)), h, gone_in=gone) for m, t, h, gone in table]

    async def _not_in_fake(self, ctx: _Ctx) -> tuple[int, Any]:
        raise ApiError(501, "endpoint not implemented by the fake")

    async def _health(self, ctx: _Ctx) -> tuple[int, Any]:
        return 200, {"status": "OK", "version": self.version}

    async def _projects(self, ctx: _Ctx) -> tuple[int, Any]:
        org = {"id": "fake-org", "name": "Fake Org"}
        return 200, {"data": [{"id": self.project_id, "name": "Fake Project", "organization": org, "metadata": {}}]}

    # ------------------------------------------------------------ v4 reads

    def _visible_traces(self) -> list[Trace]:
        now = self.now()
        with self._lock:
            return [t for t in self._traces.values() if t.visible_at <= now]

    async def _observations_v2(self, ctx: _Ctx) -> tuple[int, Any]:
        groups = set(ctx.qcsv("fields") or ["core", "basic"]) | {"core"}
        unknown = groups - set(V2_FIELD_GROUPS)
        if unknown:
            raise ApiError(400, f"Invalid fields: {sorted(unknown)}; allowed: {', '.join(V2_FIELD_GROUPS)}")
        if ctx.qbool("parseIoAsJson"):
            raise ApiError(400, "parseIoAsJson is deprecated: io is always returned as raw strings; remove it")
        limit = ctx.qint("limit", 50)
        if not 1 <= limit <= 1000:
            raise ApiError(400, f"limit must be between 1 and 1000, got {limit}")
        expand = set(ctx.qcsv("expandMetadata"))
        if self.require_time_window and not (ctx.q("fromStartTime") and ctx.q("toStartTime")):
            # Not a server rule: the reference asks clients to bound every read (§3.1, #13859).
            self._violate(ctx.exchange, "unbounded read: send both fromStartTime and toStartTime")
        rows = [(o, t) for t in self._visible_traces() for o in t.observations]
        raw_filter = ctx.q("filter")
        if raw_filter:
            conditions = _parse_filter(raw_filter)
            rows = [(o, t) for o, t in rows if all(_filter_match(c, o, t) for c in conditions)]
        else:
            rows = [(o, t) for o, t in rows if _simple_v2_match(ctx, o, t)]
        rows.sort(key=lambda r: _v2_key(*r), reverse=True)
        cursor = ctx.q("cursor")
        if cursor:
            after = tuple(_unb64(cursor))
            rows = [r for r in rows if list(_v2_key(*r)) < list(after)]
        page, more = rows[:limit], len(rows) > limit
        data = [observation_v2(o, t, groups, self.project_id, expand) for o, t in page]
        meta: Json = {"cursor": _b64(list(_v2_key(*page[-1])))} if more and page else {}
        return 200, {"data": data, "meta": meta}

    async def _scores_v3(self, ctx: _Ctx) -> tuple[int, Any]:
        groups = set(ctx.qcsv("fields"))
        unknown = groups - set(V3_SCORE_FIELD_GROUPS)
        if unknown:
            raise ApiError(400, f"Invalid fields: {sorted(unknown)}; allowed: {', '.join(V3_SCORE_FIELD_GROUPS)}")
        limit = ctx.qint("limit", 50)
        if not 1 <= limit <= 100:
            raise ApiError(400, f"limit must be between 1 and 100, got {limit}")
        subjects = [k for k in ("traceId", "sessionId", "experimentId") if ctx.q(k)]
        if len(subjects) > 1:
            raise ApiError(400, f"{' and '.join(subjects)} are mutually exclusive")
        if ctx.q("observationId") and not ctx.q("traceId"):
            raise ApiError(400, "observationId requires traceId")
        data_types = [d.upper() for d in ctx.qcsv("dataType")]
        values = ctx.qcsv("value")
        vmin, vmax = ctx.q("valueMin"), ctx.q("valueMax")
        if values and (len(data_types) != 1 or data_types[0] not in ("NUMERIC", "BOOLEAN", "CATEGORICAL")):
            raise ApiError(400, "value requires a single dataType of NUMERIC, BOOLEAN or CATEGORICAL")
        if (vmin or vmax) and data_types != ["NUMERIC"]:
            raise ApiError(400, "valueMin/valueMax require dataType=NUMERIC")
        filters: dict[str, Callable[[ScoreRow], Any]] = {
            "id": lambda s: s.id,
            "name": lambda s: s.name,
            "environment": lambda s: s.environment,
            "configId": lambda s: s.config_id,
            "queueId": lambda s: s.queue_id,
            "authorUserId": lambda s: s.author_user_id,
            "traceId": lambda s: s.trace_id,
            "sessionId": lambda s: s.session_id,
            "observationId": lambda s: s.observation_id,
            "experimentId": lambda s: s.dataset_run_id,
        }
        sources = {x.upper() for x in ctx.qcsv("source")}
        start, end = ctx.qts("fromTimestamp"), ctx.qts("toTimestamp")
        now = self.now()
        with self._lock:
            rows = [s for s in self._scores if s.visible_at is None or s.visible_at <= now]

        def keep(s: ScoreRow) -> bool:
            for name, get in filters.items():
                wanted = ctx.qcsv(name)
                if wanted and get(s) not in wanted:
                    return False
            if sources and s.source not in sources:
                return False
            if data_types and s.data_type not in data_types:
                return False
            if start and s.timestamp < start or end and s.timestamp >= end:
                return False
            if values:
                v = s.typed_value
                if s.data_type == "NUMERIC" and not any(float(x) == v for x in values):
                    return False
                if s.data_type == "BOOLEAN" and str(v).lower() not in [x.lower() for x in values]:
                    return False
                if s.data_type == "CATEGORICAL" and v not in values:
                    return False
            if vmin is not None and (s.value is None or s.value < float(vmin)):
                return False
            return not (vmax is not None and (s.value is None or s.value > float(vmax)))

        rows = sorted(filter(keep, rows), key=_score_key, reverse=True)
        cursor = ctx.q("cursor")
        if cursor:
            after = list(_unb64(cursor))
            rows = [s for s in rows if list(_score_key(s)) < after]
        page, more = rows[:limit], len(rows) > limit
        meta: Json = {"limit": limit}
        if more and page:
            meta["cursor"] = _b64(list(_score_key(page[-1])))
        return 200, {"data": [score_v3(s, groups, self.project_id) for s in page], "meta": meta}

    # ------------------------------------------------------------ v3 reads

    def _trace_scores(self, trace_id: str) -> list[ScoreRow]:
        now = self.now()
        with self._lock:
            return [s for s in self._scores if s.trace_id == trace_id and (s.visible_at is None or s.visible_at <= now)]

    async def _traces_list(self, ctx: _Ctx) -> tuple[int, Any]:
        if ctx.q("filter"):
            raise ApiError(501, "the fake does not implement the `filter` parameter of GET /traces")
        groups = set(ctx.qcsv("fields") or V3_TRACE_FIELD_GROUPS) | {"core"}
        unknown = groups - set(V3_TRACE_FIELD_GROUPS)
        if unknown:
            raise ApiError(400, f"Invalid fields: {sorted(unknown)}")
        start, end = ctx.qts("fromTimestamp"), ctx.qts("toTimestamp")
        tags, envs = ctx.qall("tags"), ctx.qall("environment")
        simple = {
            "userId": "user_id",
            "name": "name",
            "sessionId": "session_id",
            "version": "version",
            "release": "release",
        }
        traces = []
        for t in self._visible_traces():
            if any(ctx.q(p) is not None and getattr(t, a) != ctx.q(p) for p, a in simple.items()):
                continue
            if start and t.timestamp < start or end and t.timestamp >= end:
                continue
            if tags and not set(tags) <= set(t.tags) or envs and t.environment not in envs:
                continue
            traces.append(t)
        order = ctx.q("orderBy") or "timestamp.desc"
        m = re.fullmatch(r"(id|timestamp|name|userId|release|version|public|bookmarked|sessionId)\.(asc|desc)", order)
        if not m:
            raise ApiError(400, f"Invalid orderBy {order!r}: use '[field].[asc|desc]'")
        attr = {"userId": "user_id", "sessionId": "session_id"}.get(m.group(1), m.group(1))
        traces.sort(key=lambda t: (_sortable(getattr(t, attr)), t.id), reverse=m.group(2) == "desc")
        offset, limit, meta = _page(ctx, len(traces))
        data = [
            trace_with_details(t, groups, self.project_id, [s.id for s in self._trace_scores(t.id)])
            for t in traces[offset : offset + limit]
        ]
        return 200, {"data": data, "meta": meta}

    async def _trace_get(self, ctx: _Ctx) -> tuple[int, Any]:
        trace_id = ctx.params["traceId"]
        t = next((t for t in self._visible_traces() if t.id == trace_id), None)
        if t is None:
            raise ApiError(404, f"Trace {trace_id} not found within authorized project", violation=False)
        row = trace_with_details(t, {"core", "io", "metrics"}, self.project_id, [])
        row["observations"] = [observation_view(o, t) for o in t.observations]
        row["scores"] = [v for v in (score_v1(s) for s in self._trace_scores(t.id)) if v is not None]
        return 200, row

    def _session_traces(self) -> dict[str, list[Trace]]:
        out: dict[str, list[Trace]] = {}
        for t in sorted(self._visible_traces(), key=lambda t: t.timestamp):
            if t.session_id:
                out.setdefault(t.session_id, []).append(t)
        return out

    def _session_json(self, session_id: str, traces: list[Trace]) -> Json:
        return {
            "id": session_id,
            "createdAt": iso(traces[0].timestamp),
            "projectId": self.project_id,
            "environment": traces[0].environment,
        }

    async def _sessions_list(self, ctx: _Ctx) -> tuple[int, Any]:
        start, end = ctx.qts("fromTimestamp"), ctx.qts("toTimestamp")
        envs = ctx.qall("environment")
        sessions = []
        for sid, traces in self._session_traces().items():
            created = traces[0].timestamp
            if start and created < start or end and created >= end:
                continue
            if envs and traces[0].environment not in envs:
                continue
            sessions.append(self._session_json(sid, traces))
        sessions.sort(key=lambda s: (s["createdAt"], s["id"]), reverse=True)
        offset, limit, meta = _page(ctx, len(sessions))
        return 200, {"data": sessions[offset : offset + limit], "meta": meta}

    async def _session_get(self, ctx: _Ctx) -> tuple[int, Any]:
        sid = ctx.params["sessionId"]
        traces = self._session_traces().get(sid)
        if not traces:
            raise ApiError(404, f"Session {sid} not found", violation=False)
        return 200, {**self._session_json(sid, traces), "traces": [trace_v3(t) for t in traces]}

    # ------------------------------------------------------------ scores

    def _validate_score(self, body: Json) -> tuple[str, float | None, str | None, ScoreConfigRow | None]:
        """Apply the server's score rules; returns (dataType, value, stringValue, config)."""
        targets = [k for k in ("traceId", "sessionId", "datasetRunId") if body.get(k)]
        if len(targets) != 1:
            raise ApiError(
                400,
                "A score must have exactly one target: traceId (optionally with observationId), sessionId or "
                f"datasetRunId; got {targets or 'none'}",
            )
        if body.get("observationId") and not body.get("traceId"):
            raise ApiError(400, "observationId requires traceId")
        env = body.get("environment")
        if env is not None and (not _ENV.match(env) or len(env) > 40):
            raise ApiError(
                400,
                f"Invalid environment {env!r}: lowercase [a-z0-9-_], at most 40 chars, not starting with 'langfuse'",
            )
        value = body.get("value")
        config: ScoreConfigRow | None = None
        if body.get("configId"):
            with self._lock:
                config = self._configs.get(body["configId"])
            if config is None:
                raise ApiError(404, "The configId you provided does not match a valid config in this project")
            if body.get("dataType") and body["dataType"] != config.data_type:
                raise ApiError(
                    400, f"Data type mismatch based on config: expected {config.data_type}, got {body['dataType']}"
                )
            if config.is_archived:
                raise ApiError(
                    400, "Config is archived and cannot be used to create new scores. Please restore the config first."
                )
            if config.name != body.get("name"):
                raise ApiError(400, f"Name mismatch based on config: expected {config.name}, got {body.get('name')}")
        if body.get("source") == "ANNOTATION" and not config and body.get("dataType") != "CORRECTION":
            raise ApiError(400, "source ANNOTATION requires a configId (unless dataType is CORRECTION)")
        data_type = (config.data_type if config else None) or body.get("dataType")
        if data_type is None:
            data_type = "CATEGORICAL" if isinstance(value, str) else "NUMERIC"
        is_num = isinstance(value, int | float) and not isinstance(value, bool)
        if data_type in ("NUMERIC", "BOOLEAN") and not is_num:
            raise ApiError(400, f"{data_type} scores need a numeric value, got {value!r}")
        if data_type in ("CATEGORICAL", "TEXT", "CORRECTION") and not isinstance(value, str):
            raise ApiError(400, f"{data_type} scores need a string value, got {value!r}")
        if data_type == "BOOLEAN" and value not in (0, 1):
            raise ApiError(400, f"Boolean scores must have value 0 or 1, got {value!r}")
        if data_type == "TEXT" and not 1 <= len(value) <= 500:
            raise ApiError(400, f"Text scores must be 1-500 characters, got {len(value)}")
        if is_num and not math.isfinite(value):
            raise ApiError(400, "score value must be finite")
        if config is not None:
            if data_type == "NUMERIC" and (
                config.min_value is not None
                and value < config.min_value
                or config.max_value is not None
                and value > config.max_value
            ):
                raise ApiError(
                    400,
                    f"Ingested score body not valid against provided config: value {value} outside "
                    f"[{config.min_value}, {config.max_value}]",
                )
            if data_type == "CATEGORICAL":
                labels = {c["label"]: c["value"] for c in config.categories or []}
                if value not in labels:
                    raise ApiError(
                        400,
                        f"Ingested score body not valid against provided config: {value!r} is not one of "
                        f"the categories {sorted(labels)}",
                    )
                return data_type, float(labels[value]), value, config
        if data_type == "NUMERIC":
            return data_type, float(value), None, config
        if data_type == "BOOLEAN":
            return data_type, float(value), "True" if value == 1 else "False", config
        return data_type, 0.0 if data_type == "CATEGORICAL" else None, value, config

    def _store_score(self, body: Json, timestamp: datetime, endpoint: str, via: str) -> ScoreRow:
        data_type, value, string_value, _ = self._validate_score(body)
        now = self.now()
        row = ScoreRow(
            id=body.get("id") or str(uuid.uuid4()),
            name=body["name"],
            data_type=data_type,
            value=value,
            string_value=string_value,
            timestamp=timestamp,
            created_at=now,
            updated_at=now,
            source=body.get("source") or "API",
            trace_id=body.get("traceId"),
            observation_id=body.get("observationId"),
            session_id=body.get("sessionId"),
            dataset_run_id=body.get("datasetRunId"),
            comment=body.get("comment"),
            metadata=body.get("metadata"),
            config_id=body.get("configId"),
            queue_id=body.get("queueId"),
            environment=body.get("environment") or "default",
            via=via,
            visible_at=now + timedelta(seconds=self.score_read_lag) if self.score_read_lag else None,
        )
        with self._lock:
            replaced = self._upsert(row)
            self._score_writes.append(ScoreWrite(endpoint, dict(body), row.id, timestamp, now, replaced))
        return row

    def _upsert(self, row: ScoreRow) -> bool:
        """ReplacingMergeTree semantics on (toDate(timestamp), name, id); True if it replaced."""
        for i, old in enumerate(self._scores):
            if old.key == row.key:
                row.created_at = old.created_at
                self._scores[i] = row
                return True
        self._scores.append(row)
        return False

    async def _scores_create(self, ctx: _Ctx) -> tuple[int, Any]:
        endpoint = "POST /api/public/scores"
        if not self.score_batches:
            row = self._store_score(ctx.body, self.now(), endpoint, "scores")
            return 200, {"id": row.id}
        items = ctx.body
        if not items:
            raise ApiError(400, "the score list is empty")
        errors: list[Json] = []
        for i, item in enumerate(items):
            problems = self.checker.check_schema("CreateScoreRequestWithTimestamp", item)
            try:
                if problems:
                    raise ApiError(400, "; ".join(problems))
                ts = parse_ts(item["timestamp"]) if item.get("timestamp") else self.now()
                self._store_score(item, ts, endpoint, "scores")
            except ApiError as err:
                self._violate(ctx.exchange, f"score[{i}]: {err.status} {err.message}")
                errors.append({"message": f"score[{i}]: {err.message}"})
        if errors:
            return 207, {"accepted": len(items) - len(errors), "rejected": len(errors), "errors": errors}
        return 202, {"message": "Accepted"}

    async def _ingestion(self, ctx: _Ctx) -> tuple[int, Any]:
        successes: list[Json] = []
        errors: list[Json] = []
        for i, event in enumerate(ctx.body["batch"]):
            event_id = str(event.get("id", f"#{i}")) if isinstance(event, dict) else f"#{i}"
            problems = self.checker.check_event(event)
            try:
                if problems:
                    raise ApiError(400, "; ".join(problems))
                kind = event["type"]
                if self.mode == "v4" and kind not in _EVENTS_ONLY_TYPES:
                    raise ApiError(
                        400,
                        f"Event type {kind} is not accepted in events_only mode; only {', '.join(_EVENTS_ONLY_TYPES)}",
                    )
                if kind == "score-create":
                    try:
                        ts = parse_ts(event["timestamp"])
                    except ValueError as exc:
                        raise ApiError(400, f"timestamp {event['timestamp']!r} is not an ISO 8601 datetime") from exc
                    self._store_score(event["body"], ts, "POST /api/public/ingestion", "ingestion")
                elif kind != "sdk-log":
                    raise ApiError(400, f"the fake does not ingest {kind} events (seed data with seed_session)")
                successes.append({"id": event_id, "status": 201})
            except ApiError as err:
                self._violate(ctx.exchange, f"event {event_id}: {err.status} {err.message}")
                errors.append({"id": event_id, "status": err.status, "message": err.message, "error": err.error})
        return 207, {"successes": successes, "errors": errors}

    # ------------------------------------------------------------ score configs

    async def _configs_list(self, ctx: _Ctx) -> tuple[int, Any]:
        with self._lock:
            rows = sorted(self._configs.values(), key=lambda c: c.created_at, reverse=True)
        offset, limit, meta = _page(ctx, len(rows))
        return 200, {
            "data": [score_config_json(c, self.project_id) for c in rows[offset : offset + limit]],
            "meta": meta,
        }

    def _check_config_fields(self, data_type: str, body: Json) -> None:
        name = body.get("name")
        if name is not None:
            if len(name) > 35:
                raise ApiError(400, f"Score config name must be at most 35 characters, got {len(name)}: {name!r}")
            if not _CONFIG_NAME.match(name):
                raise ApiError(
                    400,
                    "Score config name may only contain letters, numbers, underscores, spaces, periods, "
                    f"parentheses and hyphens: {name!r}",
                )
        categories = body.get("categories")
        if data_type == "CATEGORICAL" and "categories" in body:
            if not categories:
                raise ApiError(400, "Categorical score configs need at least one category")
            labels = [c["label"] for c in categories]
            values = [c["value"] for c in categories]
            if len(set(labels)) != len(labels) or len(set(values)) != len(values):
                raise ApiError(400, "Category labels and values must be unique")
        if data_type == "BOOLEAN" and categories:
            raise ApiError(400, "Categories are generated for boolean score configs and cannot be passed")
        if data_type != "NUMERIC" and (body.get("minValue") is not None or body.get("maxValue") is not None):
            raise ApiError(400, "minValue/maxValue are only allowed for NUMERIC score configs")
        lo, hi = body.get("minValue"), body.get("maxValue")
        if lo is not None and hi is not None and lo >= hi:
            raise ApiError(400, f"minValue ({lo}) must be less than maxValue ({hi})")

    async def _configs_create(self, ctx: _Ctx) -> tuple[int, Any]:
        body = ctx.body
        data_type = body["dataType"]
        if data_type == "CATEGORICAL" and not body.get("categories"):
            raise ApiError(400, "Categorical score configs need at least one category")
        self._check_config_fields(data_type, body)
        row = self.seed_score_config(
            body["name"],
            data_type,
            categories=body.get("categories"),
            min_value=body.get("minValue"),
            max_value=body.get("maxValue"),
            description=body.get("description"),
        )
        return 200, score_config_json(row, self.project_id)

    def _config(self, config_id: str) -> ScoreConfigRow:
        with self._lock:
            row = self._configs.get(config_id)
        if row is None:
            raise ApiError(404, f"Score config {config_id} not found", violation=False)
        return row

    async def _config_get(self, ctx: _Ctx) -> tuple[int, Any]:
        return 200, score_config_json(self._config(ctx.params["configId"]), self.project_id)

    async def _config_update(self, ctx: _Ctx) -> tuple[int, Any]:
        row = self._config(ctx.params["configId"])
        body = ctx.body
        self._check_config_fields(row.data_type, body)
        with self._lock:
            for key, attr in (
                ("isArchived", "is_archived"),
                ("name", "name"),
                ("categories", "categories"),
                ("minValue", "min_value"),
                ("maxValue", "max_value"),
                ("description", "description"),
            ):
                if key in body:
                    setattr(row, attr, body[key])
            row.updated_at = self.now()
        return 200, score_config_json(row, self.project_id)

    # ------------------------------------------------------------ annotation queues

    async def _queues_list(self, ctx: _Ctx) -> tuple[int, Any]:
        with self._lock:
            rows = sorted(self._queues.values(), key=lambda q: q.created_at, reverse=True)
        offset, limit, meta = _page(ctx, len(rows))
        return 200, {"data": [queue_json(q) for q in rows[offset : offset + limit]], "meta": meta}

    async def _queues_create(self, ctx: _Ctx) -> tuple[int, Any]:
        body = ctx.body
        ids = body["scoreConfigIds"]
        if not ids:
            raise ApiError(400, "At least one score config id is required to create an annotation queue")
        with self._lock:
            missing = [i for i in ids if i not in self._configs]
        if missing:
            raise ApiError(400, f"Score configs not found in this project: {missing}")
        row = self.seed_queue(body["name"], ids, body.get("description"))
        return 200, queue_json(row)

    def _queue(self, queue_id: str, *, writing: bool = False) -> QueueRow:
        """The queue or a 404 (a violation only when the client writes to a missing queue)."""
        with self._lock:
            row = self._queues.get(queue_id)
        if row is None:
            raise ApiError(404, f"Annotation queue {queue_id} not found", violation=writing)
        return row

    async def _queue_get(self, ctx: _Ctx) -> tuple[int, Any]:
        return 200, queue_json(self._queue(ctx.params["queueId"]))

    async def _items_list(self, ctx: _Ctx) -> tuple[int, Any]:
        queue = self._queue(ctx.params["queueId"])
        status = ctx.q("status")
        with self._lock:
            rows = [i for i in self._items if i.queue_id == queue.id and (status is None or i.status == status)]
        rows.sort(key=lambda i: i.created_at)
        offset, limit, meta = _page(ctx, len(rows))
        return 200, {"data": [queue_item_json(i) for i in rows[offset : offset + limit]], "meta": meta}

    async def _items_create(self, ctx: _Ctx) -> tuple[int, Any]:
        queue = self._queue(ctx.params["queueId"], writing=True)
        body, now = ctx.body, self.now()
        status = body.get("status") or "PENDING"
        row = QueueItemRow(
            id=str(uuid.uuid4()),
            queue_id=queue.id,
            object_id=body["objectId"],
            object_type=body["objectType"],
            status=status,
            created_at=now,
            updated_at=now,
            completed_at=now if status == "COMPLETED" else None,
        )
        with self._lock:
            self._items.append(row)  # no dedup: the real server has no unique constraint (#12938)
        return 200, queue_item_json(row)

    def _item(self, ctx: _Ctx) -> QueueItemRow:
        queue = self._queue(ctx.params["queueId"])
        with self._lock:
            row = next((i for i in self._items if i.id == ctx.params["itemId"] and i.queue_id == queue.id), None)
        if row is None:
            raise ApiError(404, f"Annotation queue item {ctx.params['itemId']} not found", violation=False)
        return row

    async def _item_get(self, ctx: _Ctx) -> tuple[int, Any]:
        return 200, queue_item_json(self._item(ctx))

    async def _item_update(self, ctx: _Ctx) -> tuple[int, Any]:
        row = self._item(ctx)
        status = ctx.body.get("status")
        with self._lock:
            if status:
                row.status = status
                row.completed_at = self.now() if status == "COMPLETED" else None
            row.updated_at = self.now()
        return 200, queue_item_json(row)

    async def _score_delete(self, ctx: _Ctx) -> tuple[int, Any]:
        score_id = ctx.params["scoreId"]
        with self._lock:
            kept = [s for s in self._scores if s.id != score_id]
            if len(kept) == len(self._scores):
                raise ApiError(404, f"Score {score_id} not found", violation=False)
            self._scores = kept
            self.deleted_scores.append(score_id)
        return 204, None

    async def _item_delete(self, ctx: _Ctx) -> tuple[int, Any]:
        row = self._item(ctx)
        with self._lock:
            self._items = [i for i in self._items if i.id != row.id]
        return 200, {"success": True, "message": "Item removed from queue"}

    # ------------------------------------------------------------ comments

    async def _comments_list(self, ctx: _Ctx) -> tuple[int, Any]:
        object_type, object_id, author = ctx.q("objectType"), ctx.q("objectId"), ctx.q("authorUserId")
        if object_id and not object_type:
            raise ApiError(400, "objectType is required when filtering by objectId")
        with self._lock:
            rows = [
                c
                for c in self._comments
                if (not object_type or c.object_type == object_type.upper())
                and (not object_id or c.object_id == object_id)
                and (not author or c.author_user_id == author)
            ]
        offset, limit, meta = _page(ctx, len(rows))
        return 200, {"data": [comment_json(c, self.project_id) for c in rows[offset : offset + limit]], "meta": meta}

    async def _comments_create(self, ctx: _Ctx) -> tuple[int, Any]:
        body = ctx.body
        if body["projectId"] != self.project_id:
            raise ApiError(403, f"projectId {body['projectId']!r} does not match the API key's project")
        kind = body["objectType"]
        if kind not in ("TRACE", "OBSERVATION", "SESSION", "PROMPT"):
            raise ApiError(400, f"Invalid objectType {kind!r}: TRACE, OBSERVATION, SESSION or PROMPT")
        content = body["content"]
        if not content.strip() or len(content) > 5000:
            raise ApiError(400, "Comment content must be 1-5000 characters")
        if not self._object_exists(kind, body["objectId"]):
            raise ApiError(404, f"No {kind} with id {body['objectId']} in project {self.project_id}")
        now = self.now()
        row = CommentRow(str(uuid.uuid4()), kind, body["objectId"], content, now, now, body.get("authorUserId"))
        with self._lock:
            self._comments.append(row)
        return 200, {"id": row.id}

    def _object_exists(self, kind: str, object_id: str) -> bool:
        with self._lock:
            traces = list(self._traces.values())
        if kind == "TRACE":
            return any(t.id == object_id for t in traces)
        if kind == "SESSION":
            return any(t.session_id == object_id for t in traces)
        if kind == "OBSERVATION":
            return any(o.id == object_id for t in traces for o in t.observations)
        return True

    async def _comment_get(self, ctx: _Ctx) -> tuple[int, Any]:
        with self._lock:
            row = next((c for c in self._comments if c.id == ctx.params["commentId"]), None)
        if row is None:
            raise ApiError(404, "Comment not found", violation=False)
        return 200, comment_json(row, self.project_id)


# ---------------------------------------------------------------- helpers


def _template_regex(template: str) -> str:
    return re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))


def _sortable(value: Any) -> Any:
    return (value is not None, value if value is not None else "")


def _trace_hash(trace_id: str) -> int:
    return int.from_bytes(trace_id.encode()[:4].ljust(4, b"\0"), "big") ^ len(trace_id)


def _v2_key(o: Observation, t: Trace) -> tuple[str, int, str]:
    """Sort key of v2 observations: start_time DESC, hash(trace_id) DESC, span id DESC."""
    return (iso(o.start_time) or "", _trace_hash(t.id), o.id)


def _score_key(s: ScoreRow) -> tuple[str, str, str]:
    return (iso(s.timestamp) or "", s.id, s.name)


def _simple_v2_match(ctx: _Ctx, o: Observation, t: Trace) -> bool:
    checks = {
        "name": o.name,
        "userId": t.user_id,
        "sessionId": t.session_id,
        "type": o.type,
        "traceId": t.id,
        "level": o.level,
        "version": o.version,
    }
    for param, actual in checks.items():
        wanted = ctx.q(param)
        if wanted is not None and actual != wanted:
            return False
    parent = ctx.q("parentObservationId")
    if parent is not None and (o.parent_observation_id or "") != parent:
        return False
    root = ctx.qbool("isRootObservation")
    if root is not None and o.is_root != root:
        return False
    envs = [e for e in ctx.qall("environment") if e]
    if envs and t.environment not in envs:
        return False
    start, end = ctx.qts("fromStartTime"), ctx.qts("toStartTime")
    return not (start and o.start_time < start or end and o.start_time >= end)


_FILTER_COLUMNS: dict[str, Callable[[Observation, Trace], Any]] = {
    "id": lambda o, t: o.id,
    "type": lambda o, t: o.type,
    "name": lambda o, t: o.name,
    "traceId": lambda o, t: t.id,
    "startTime": lambda o, t: o.start_time,
    "endTime": lambda o, t: o.end_time,
    "environment": lambda o, t: t.environment,
    "level": lambda o, t: o.level,
    "statusMessage": lambda o, t: o.status_message,
    "version": lambda o, t: o.version,
    "userId": lambda o, t: t.user_id,
    "sessionId": lambda o, t: t.session_id,
    "isRootObservation": lambda o, t: o.is_root,
    "traceName": lambda o, t: t.name,
    "traceTags": lambda o, t: t.tags,
    "tags": lambda o, t: t.tags,
    "model": lambda o, t: o.model,
    "input": lambda o, t: None if o.input is None else json.dumps(o.input),
    "output": lambda o, t: None if o.output is None else json.dumps(o.output),
    "metadata": lambda o, t: o.metadata,
}


def _parse_filter(raw: str) -> list[Json]:
    try:
        conditions = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"filter is not valid JSON: {exc}") from exc
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        raise ApiError(400, "filter must be a JSON array of filter conditions")
    for c in conditions:
        if c.get("column") not in _FILTER_COLUMNS:
            raise ApiError(400, f"filter column {c.get('column')!r} is not supported (by the fake or the server)")
        if not c.get("type") or not c.get("operator"):
            raise ApiError(400, f"filter condition needs type, column and operator: {c}")
    io = [c for c in conditions if c["column"] in ("input", "output")]
    if io and not any(c["operator"] in ("=", "matches") for c in io):
        raise ApiError(400, "input/output filters need at least one '=' or 'matches' condition")
    return conditions


def _filter_match(c: Json, o: Observation, t: Trace) -> bool:
    actual = _FILTER_COLUMNS[c["column"]](o, t)
    kind, op, value = c["type"], c["operator"], c.get("value")
    if kind == "null":
        return (actual is None) == (op == "is null")
    if c["column"] == "metadata":
        actual = (actual or {}).get(c.get("key"))
        actual = actual if actual is None or isinstance(actual, str) else json.dumps(actual)
    if kind == "datetime":
        if actual is None:
            return False
        other = parse_ts(value)
        return {">": actual > other, "<": actual < other, ">=": actual >= other, "<=": actual <= other}[op]
    if kind == "boolean":
        return (actual == value) == (op == "=")
    if kind in ("stringOptions", "categoryOptions"):
        return (actual in value) == (op == "any of")
    if kind == "arrayOptions":
        have = set(actual or [])
        return {
            "any of": bool(have & set(value)),
            "none of": not have & set(value),
            "all of": set(value) <= have,
        }[op]
    if kind in ("number", "numberObject"):
        if actual is None:
            return False
        a, b = float(actual), float(value)
        return {"=": a == b, ">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]
    text = "" if actual is None else str(actual)
    needle = str(value)
    if op == "matches":
        return needle.lower() in text.lower() if c["column"] in ("input", "output") else needle in text
    return {
        "=": text == needle,
        "contains": needle in text,
        "does not contain": needle not in text,
        "starts with": text.startswith(needle),
        "ends with": text.endswith(needle),
    }[op]


async def _wait_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep `seconds`; False as soon as the client hangs up (e.g. its timeout fired)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, 0.05))
        if await request.is_disconnected():
            return False
    return True
