"""The HTTP edge to one Langfuse project: generation detection, retries, and the endpoints we use.

v4 observations (and the v4 batch `POST /scores`) go through the `langfuse` 5.x SDK's async API;
everything SDK 5 dropped or that is the same on both generations (v3 `/traces`, `/ingestion`,
score configs, annotation queues, comments, projects) goes through `httpx` with Basic auth.
Every call retries 408/429/5xx and network errors a bounded number of times, honouring
`Retry-After` up to `max_retry_wait_seconds` (the SDK's own retries are switched off).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

import httpx
import structlog
from langfuse.api import AsyncLangfuseAPI, CreateScoreRequest
from langfuse.api.core.api_error import ApiError

from tracing_eval.config import ConfigError
from tracing_eval.connectors.http_bodies import ReleasingClient
from tracing_eval.connectors.langfuse.mapping import iso
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.ratelimit import backoff_delay, retry_after_seconds

log = structlog.get_logger(__name__)

Generation = Literal["v4", "v3"]
T = TypeVar("T")
Params = Sequence[tuple[str, Any]]

API = "/api/public"
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})
V3_PAGE_LIMIT = 100  # page-based endpoints allow at most 100 per page
_NO_SDK_RETRIES: Any = {"max_retries": 0}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class LangfuseError(Exception):
    """A Langfuse call failed; `status` is the HTTP status (None for network errors)."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in RETRYABLE or self.status >= 500

    @property
    def permanent(self) -> bool:
        return permanent(self.status)


def permanent(status: int | None) -> bool:
    """A client error that retrying the same request cannot fix (auth errors are not: keys get fixed)."""
    return status is not None and 400 <= status < 500 and status not in {401, 403, 408, 429}


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


def _params(params: Mapping[str, Any] | Params) -> tuple[tuple[str, str], ...]:
    """Query pairs without None values; lists become repeated keys; datetimes ISO 8601."""
    pairs = params.items() if isinstance(params, Mapping) else params
    out: list[tuple[str, str]] = []
    for key, value in pairs:
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if v is None:
                continue
            if isinstance(v, datetime):
                v = iso(v)
            elif isinstance(v, bool):
                v = "true" if v else "false"
            out.append((key, str(v)))
    return tuple(out)


class LangfuseClient:
    """Async client for one project; one per source or sink, closed with `aclose()`."""

    def __init__(
        self,
        settings: LangfuseSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        public_key, secret_key = settings.resolved_public_key(), settings.resolved_secret_key()
        if not public_key or not secret_key:
            raise ConfigError("Langfuse keys missing: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY")
        self.settings = settings
        self.base_url = settings.resolved_base_url()
        self.public_key = public_key
        self._sleep = sleep
        self._http = ReleasingClient(
            auth=httpx.BasicAuth(public_key, secret_key),
            timeout=settings.timeout_seconds,
            transport=transport,
            headers={"User-Agent": "tracing-eval", "X-Langfuse-Public-Key": public_key},
        )
        self.api = AsyncLangfuseAPI(
            base_url=self.base_url,
            username=public_key,
            password=secret_key,
            x_langfuse_public_key=public_key,
            httpx_client=self._http,
            timeout=settings.timeout_seconds,
        )
        self._generation: Generation | None = None
        self._project_id: str | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- retries ---------------------------------------------------------------------------

    async def _retrying(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call`, retrying retryable failures up to `max_retries` times."""
        attempt = 0
        while True:
            try:
                return await call()
            except httpx.TransportError as exc:
                error = LangfuseError(f"{what}: {type(exc).__name__}: {exc}")
            except LangfuseError as exc:
                error = exc
            attempt += 1
            if not error.retryable or attempt > self.settings.max_retries:
                raise error
            wait = error.retry_after
            if wait is None:
                wait = backoff_delay(
                    attempt, base=self.settings.retry_backoff_seconds, cap=self.settings.max_retry_wait_seconds
                )
            if wait > self.settings.max_retry_wait_seconds:
                raise error  # the outbox / next tick will come back later
            log.info("langfuse call retried", call=what, status=error.status, attempt=attempt, wait=round(wait, 2))
            await self._sleep(wait)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Params = (),
        json: Any = None,
        ok: Sequence[int] = (200, 201, 202, 207),
    ) -> httpx.Response:
        """One REST call under `/api/public`, retried; a non-`ok` status raises `LangfuseError`."""
        url = f"{self.base_url}{API}{path}"
        what = f"{method} {path}"

        async def call() -> httpx.Response:
            response = await self._http.request(method, url, params=_params(params), json=json)
            if response.status_code not in ok:
                raise LangfuseError(
                    f"{what}: HTTP {response.status_code}: {str(_body(response))[:300]}",
                    status=response.status_code,
                    body=_body(response),
                    retry_after=retry_after_seconds(response.headers),
                )
            return response

        return await self._retrying(what, call)

    async def get_json(self, path: str, params: Mapping[str, Any] | Params = ()) -> Any:
        return (await self.request("GET", path, params=params)).json()

    async def post_json(self, path: str, body: Any) -> Any:
        return _body(await self.request("POST", path, json=body))

    async def _sdk(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """An SDK call with the SDK's retries off and its errors as `LangfuseError`, retried here."""

        async def wrapped() -> T:
            try:
                return await call()
            except ApiError as exc:
                headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
                raise LangfuseError(
                    f"{what}: HTTP {exc.status_code}: {str(exc.body)[:300]}",
                    status=exc.status_code,
                    body=exc.body,
                    retry_after=retry_after_seconds(headers),
                ) from None

        return await self._retrying(what, wrapped)

    async def all_pages(self, path: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of a page-based list endpoint (`data` + `meta.totalPages`)."""
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            body = await self.get_json(path, {**(params or {}), "page": page, "limit": V3_PAGE_LIMIT})
            data = body.get("data") or []
            items += data
            total = (body.get("meta") or {}).get("totalPages")
            if not data or (isinstance(total, int) and page >= total):
                return items
            page += 1

    # -- generation ------------------------------------------------------------------------

    async def generation(self) -> Generation:
        """v4 when `/v2/observations` answers (v4 servers, Cloud), v3 when it is 404; cached."""
        if self._generation is not None:
            return self._generation
        if self.settings.generation != "auto":
            self._generation = self.settings.generation
            return self._generation
        health = await self.get_json("/health")
        now = datetime.now(UTC)
        probe = await self.request(
            "GET",
            "/v2/observations",
            params={"limit": 1, "fields": "core", "fromStartTime": now - timedelta(minutes=1), "toStartTime": now},
            ok=(200, 404),
        )
        self._generation = "v4" if probe.status_code == 200 else "v3"
        log.info("langfuse server detected", url=self.base_url, version=health.get("version"), read=self._generation)
        return self._generation

    async def project_id(self) -> str:
        """The project the keys belong to (needed to create comments)."""
        if self._project_id is None:
            data = (await self.get_json("/projects")).get("data") or []
            if not data:
                raise LangfuseError("GET /projects: no project for these keys (organization key?)", status=403)
            self._project_id = str(data[0]["id"])
        return self._project_id

    # -- reading ---------------------------------------------------------------------------

    async def observations(
        self,
        *,
        start: datetime,
        end: datetime,
        fields: str,
        limit: int,
        environment: Sequence[str] = (),
        cursor: str | None = None,
        session_id: str | None = None,
        trace_id: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of `GET /v2/observations` in [start, end) (of one session or trace, when given)
        and the next cursor (v4, via the SDK)."""

        async def call() -> Any:
            return await self.api.observations.get_many(
                fields=fields,
                limit=limit,
                cursor=cursor,
                session_id=session_id,
                trace_id=trace_id,
                environment=list(environment) or None,
                from_start_time=start,
                to_start_time=end,
                request_options=_NO_SDK_RETRIES,
            )

        page = await self._sdk("GET /v2/observations", call)
        return [row.dict() for row in page.data], page.meta.cursor

    async def traces(
        self, *, start: datetime, end: datetime, page: int, limit: int = V3_PAGE_LIMIT, params: Params = ()
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page of v3 `GET /traces` in [start, end), oldest first, and the number of pages."""
        query: list[tuple[str, Any]] = [
            ("fromTimestamp", start),
            ("toTimestamp", end),
            ("orderBy", "timestamp.asc"),
            ("page", page),
            ("limit", min(limit, V3_PAGE_LIMIT)),
            *params,
        ]
        body = await self.get_json("/traces", query)
        return body.get("data") or [], (body.get("meta") or {}).get("totalPages")

    async def trace(self, trace_id: str) -> dict[str, Any] | None:
        """v3 `GET /traces/{id}` with observations; None when the trace is gone."""
        response = await self.request("GET", f"/traces/{trace_id}", ok=(200, 404))
        return response.json() if response.status_code == 200 else None

    async def session(self, session_id: str) -> dict[str, Any] | None:
        """v3 `GET /sessions/{id}` with its traces (without observations); None when it is gone."""
        response = await self.request("GET", f"/sessions/{session_id}", ok=(200, 404))
        return response.json() if response.status_code == 200 else None

    # -- scores ----------------------------------------------------------------------------

    async def scores(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every score matching `params` from `GET /v3/scores` (v3 and v4), with comment, metadata and subject."""
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {**params, "fields": "details,subject", "limit": V3_PAGE_LIMIT, "cursor": cursor}
            body = await self.get_json("/v3/scores", query)
            data = body.get("data") or []
            rows += data
            cursor = (body.get("meta") or {}).get("cursor")
            if not cursor or not data:
                return rows

    async def ingest(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        """`POST /ingestion` (always 207: per-event successes and errors)."""
        return await self.post_json("/ingestion", {"batch": events})

    async def create_scores(self, scores: list[dict[str, Any]]) -> Any:
        """The batch `POST /scores` with timestamps (servers >= v4.59, via the SDK)."""
        request = [CreateScoreRequest(**{_snake(k): v for k, v in s.items()}) for s in scores]
        return await self._sdk(
            "POST /scores", lambda: self.api.scores.create(request=request, request_options=_NO_SDK_RETRIES)
        )

    async def delete_score(self, score_id: str) -> bool:
        """`DELETE /scores/{scoreId}` (v3 and v4); False when there was no such score."""
        response = await self.request("DELETE", f"/scores/{score_id}", ok=(200, 204, 404))
        return response.status_code != 404

    async def score_configs(self) -> list[dict[str, Any]]:
        return await self.all_pages("/score-configs")

    async def create_score_config(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.post_json("/score-configs", body)

    # -- review ----------------------------------------------------------------------------

    async def queues(self) -> list[dict[str, Any]]:
        return await self.all_pages("/annotation-queues")

    async def create_queue(self, name: str, score_config_ids: list[str], description: str) -> dict[str, Any]:
        body = {"name": name, "description": description, "scoreConfigIds": score_config_ids}
        return await self.post_json("/annotation-queues", body)

    async def queue_items(self, queue_id: str, status: str | None = None) -> list[dict[str, Any]]:
        return await self.all_pages(f"/annotation-queues/{queue_id}/items", {"status": status})

    async def create_queue_item(self, queue_id: str, object_id: str, object_type: str) -> dict[str, Any]:
        body = {"objectId": object_id, "objectType": object_type}
        return await self.post_json(f"/annotation-queues/{queue_id}/items", body)

    async def comments(self, object_type: str, object_id: str) -> list[dict[str, Any]]:
        return await self.all_pages("/comments", {"objectType": object_type, "objectId": object_id})

    async def create_comment(self, object_type: str, object_id: str, content: str) -> dict[str, Any]:
        body = {
            "projectId": await self.project_id(),
            "objectType": object_type,
            "objectId": object_id,
            "content": content,
        }
        return await self.post_json("/comments", body)
