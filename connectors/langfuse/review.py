"""Failing threads -> a Langfuse annotation queue, once per thread version.

Langfuse does not deduplicate queue items and the outbox delivers at least once, so each routed
version leaves a comment on the session whose last line is a marker
(`tracing-eval review · thread <key> · version <n> · queue item <id>`). Routing a version:

1. a comment with its marker exists -> done (a redelivery);
2. else reuse the session's PENDING item in the queue, or create one (objectType SESSION; a
   thread without a session is one trace: objectType TRACE);
3. write the comment: which metrics failed, on what, with their scores and reasons, and the marker.

A crash between 2 and 3 is repaired by the redelivery (the pending item is reused). The queue
(default `tracing-eval review`) is created on first use with the reviewer's verdict config and
the configs of the metrics that failed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from tracing_eval.connectors.langfuse.client import LangfuseClient, LangfuseError
from tracing_eval.connectors.langfuse.configs import ScoreConfigs
from tracing_eval.delivery import ReviewDelivery

log = structlog.get_logger(__name__)

MAX_CONTENT = 5000  # Langfuse's comment limit
MAX_REASON = 400
_MARKER = re.compile(r"tracing-eval review · thread (.+?) · version (\d+)")


def review_object(thread_key: str) -> tuple[str, str]:
    """(objectType, objectId) of a thread: its session, or its one trace."""
    session_id, trace_id = split_key(thread_key)
    return ("SESSION", session_id) if session_id is not None else ("TRACE", str(trace_id))


def split_key(thread_key: str) -> tuple[str | None, str | None]:
    """(session id, trace id) of a thread key, `<source>:<conversation id>` or `<source>:trace:<trace id>`.

    Threads pulled from Langfuse are its sessions; threads received over OTLP are the same sessions
    when the app also exports to Langfuse, which takes `gen_ai.conversation.id` as the session id
    (after `langfuse.session.id` and `session.id`, which the conventions read first too)."""
    _, _, rest = thread_key.partition(":")
    if rest.startswith("trace:"):
        return None, rest.removeprefix("trace:")
    return rest, None


def marker(thread_key: str, version: int, item_id: str) -> str:
    return f"tracing-eval review · thread {thread_key} · version {version} · queue item {item_id}"


def marked_versions(comments: Iterable[Mapping[str, Any]], thread_key: str) -> set[int]:
    """Versions of this thread already routed, from the markers in its comments."""
    found = set()
    for comment in comments:
        for match in _MARKER.finditer(str(comment.get("content") or "")):
            if match[1] == thread_key:
                found.add(int(match[2]))
    return found


def _number(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "–"


def review_comment(thread_key: str, version: int, reasons: Sequence[Mapping[str, Any]], item_id: str) -> str:
    """Markdown: what failed and why, one line per result, then the marker line."""
    head = f"**tracing-eval** flagged this conversation (version {version}): {len(reasons)} check(s) failed."
    tail = marker(thread_key, version, item_id)
    lines = []
    for r in reasons:
        score = f"score {_number(r.get('score'))}"
        if r.get("threshold") is not None:
            score += f" < {_number(r.get('threshold'))}"
        label = f", label `{r['label']}`" if r.get("label") else ""
        status = "" if r.get("status") in (None, "ok") else f", status {r['status']}"
        why = " ".join(str(r.get("reason") or "").split())
        why = why if len(why) <= MAX_REASON else why[: MAX_REASON - 1] + "…"
        lines.append(
            f"- `{r.get('metric')}` ({r.get('target') or 'thread'}): {score}{label}{status}"
            + (f" — {why}" if why else "")
        )
    body = "\n".join(lines)
    room = MAX_CONTENT - len(head) - len(tail) - 4
    if len(body) > room:
        body = body[: room - 1] + "…"
    return f"{head}\n\n{body}\n\n{tail}"


class ReviewRouter:
    """Routes review items (thread key and version, reasons) to one queue."""

    def __init__(self, client: LangfuseClient, configs: ScoreConfigs, queue_name: str) -> None:
        self.client = client
        self.configs = configs
        self.queue_name = queue_name
        self._queue_id: str | None = None
        self._lock = asyncio.Lock()

    async def route(self, item: ReviewDelivery) -> None:
        thread_key, version, reasons = item.thread_key, item.thread_version, item.reasons
        object_type, object_id = review_object(thread_key)
        if version in marked_versions(await self.client.comments(object_type, object_id), thread_key):
            return
        try:
            item_id = await self._item(reasons, object_type, object_id)
        except LangfuseError as exc:
            if exc.status != 404:
                raise
            self._queue_id = None  # the queue was deleted: find or create it again
            item_id = await self._item(reasons, object_type, object_id)
        await self.client.create_comment(object_type, object_id, review_comment(thread_key, version, reasons, item_id))
        log.info("thread routed to the annotation queue", thread_key=thread_key, version=version, item=item_id)

    async def _item(self, reasons: Sequence[Mapping[str, Any]], object_type: str, object_id: str) -> str:
        """The object's pending item in the queue, created when there is none."""
        queue_id = await self.queue_id(reasons)
        for item in await self.client.queue_items(queue_id, "PENDING"):
            if item.get("objectId") == object_id and item.get("objectType") == object_type:
                return str(item["id"])
        return str((await self.client.create_queue_item(queue_id, object_id, object_type))["id"])

    async def queue_id(self, reasons: Sequence[Mapping[str, Any]]) -> str:
        """The queue's id; created (with the score configs reviewers need) when missing."""
        if self._queue_id is not None:
            return self._queue_id
        async with self._lock:
            if self._queue_id is None:
                self._queue_id = await self._find_or_create(reasons)
        return self._queue_id

    def _oldest(self, queues: list[dict[str, Any]]) -> str | None:
        named = [q for q in queues if q.get("name") == self.queue_name]
        return str(min(named, key=lambda q: (str(q.get("createdAt") or ""), str(q["id"])))["id"]) if named else None

    async def _find_or_create(self, reasons: Sequence[Mapping[str, Any]]) -> str:
        found = self._oldest(await self.client.queues())
        if found is not None:
            return found
        refs = [await self.configs.review()]
        for metric in dict.fromkeys(str(r.get("metric")) for r in reasons if r.get("metric")):
            refs.append(await self.configs.for_metric(metric))
        config_ids = list(dict.fromkeys(ref.id for ref in refs if ref is not None))
        if not config_ids:
            raise RuntimeError("no score config available for the annotation queue")
        description = "Conversations tracing-eval flagged: each comment says which checks failed and why."
        await self.client.create_queue(self.queue_name, config_ids, description)
        found = self._oldest(await self.client.queues())  # a racing replica's queue wins if it is older
        if found is None:
            raise RuntimeError(f"annotation queue {self.queue_name!r} was created but is not listed")
        return found
