"""The webhook sink: review items as signed JSON POSTs to every configured URL.

One POST per URL per review outbox row (a thread version routed for review). Headers:

- `X-Tracing-Eval-Delivery: <thread_key>@<version>`: the same on every retry; receivers dedupe on it.
- `X-Tracing-Eval-Timestamp: <unix seconds>`: when this attempt was sent (also `sent_at` in the body).
- `X-Tracing-Eval-Signature: sha256=<hex HMAC-SHA256 of the raw body>`, when a secret is set.

2xx is delivered. 408, 429, 5xx, timeouts and connection errors raise, and the outbox retries
with backoff; any other status (4xx, 3xx) is a `PermanentSinkError` and the row is parked.
With several URLs a row counts as delivered once every URL has taken it; a URL that already took
a delivery is not POSTed again by the same process, but after a restart it may be, so receivers
must treat the delivery id as an idempotency key.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import orjson

from tracing_eval.connectors.review.settings import WebhookSettings
from tracing_eval.delivery import Delivery, ReviewDelivery
from tracing_eval.routing import PRIORITIES
from tracing_eval.settings_base import ConfigError
from tracing_eval.sinks import BaseSink, PermanentSinkError

DELIVERY_HEADER = "X-Tracing-Eval-Delivery"
SIGNATURE_HEADER = "X-Tracing-Eval-Signature"
TIMESTAMP_HEADER = "X-Tracing-Eval-Timestamp"
EVENT_TYPE = "tracing_eval.review"
_RETRYABLE_4XX = frozenset({408, 429})
_REMEMBERED = 10_000  # (delivery, url) pairs kept to skip URLs that already succeeded


class WebhookError(Exception):
    """A POST failed in a way a retry may fix (5xx, 408, 429, timeout, connection error)."""


def sign(secret: str | bytes, body: bytes) -> str:
    """The signature header value for `body`: `sha256=<hex digest>`."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def verify(secret: str | bytes, body: bytes, signature: str | None) -> bool:
    """Constant-time check of a signature header against the raw body (for receivers and tests)."""
    return signature is not None and hmac.compare_digest(sign(secret, body), signature)


def delivery_id(item: ReviewDelivery) -> str:
    """Stable id of one review delivery: `<thread_key>@<thread_version>`."""
    return f"{item.thread_key}@{item.thread_version}"


def webhook_body(item: ReviewDelivery, sent_at: int) -> dict[str, Any]:
    """The JSON document POSTed for one review item."""
    reasons, anchor = item.reasons, item.anchor
    routes = item.routes or list(dict.fromkeys(r["route"] for r in reasons if r.get("route")))
    return {
        "type": EVENT_TYPE,
        "delivery_id": delivery_id(item),
        "sent_at": sent_at,
        "review_id": item.review_id,
        "thread": {
            "key": item.thread_key,
            "version": item.thread_version,
            "conversation_id": anchor.conversation_id,
            "last_trace_id": anchor.trace_id,
            "last_span_id": anchor.span_id,
            "last_response_id": anchor.response_id,
        },
        "priority": item.priority or _highest(r.get("priority") for r in reasons),
        "routes": routes,
        "failed_metrics": sorted({r["metric"] for r in reasons}),
        "reasons": reasons,
        "links": item.links,
    }


def shown_url(url: str) -> str:
    """A webhook URL as logs and stored errors show it: scheme, host and port only. Chat webhooks
    (Slack, Teams, Discord) carry their token in the path or query."""
    u = httpx.URL(url)
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}/…" if u.raw_path not in (b"", b"/") else f"{u.scheme}://{u.host}{port}/"


def _highest(priorities: Iterable[str | None]) -> str:
    known = [p for p in priorities if p in PRIORITIES]
    return max(known, key=PRIORITIES.index) if known else "normal"


class WebhookSink(BaseSink):
    """`Sink` named `webhook`: delivers `review` payloads (results are ignored)."""

    name = "webhook"
    kinds = frozenset({"review"})

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not settings.urls:
            raise ConfigError("sink 'webhook' needs at least one URL: set [sinks.webhook] urls")
        for url in settings.urls:
            if httpx.URL(url).scheme not in ("http", "https"):
                raise ConfigError(f"[sinks.webhook] urls: {url!r} is not an http(s) URL")
        self.urls = list(settings.urls)
        self._secret = settings.secret.get_secret_value().encode() if settings.secret else None
        self._client = client or httpx.AsyncClient(timeout=settings.timeout_seconds, follow_redirects=False)
        self._owns_client = client is None
        self._clock = clock
        self._done: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def deliver(self, delivery: Delivery) -> None:
        """POST one review item to every URL that has not taken it yet; raise unless all succeed."""
        if not isinstance(delivery, ReviewDelivery) or not delivery.goes_to(self.name):
            return  # not a review item, or routed elsewhere
        delivery_key = delivery_id(delivery)
        sent_at = int(self._clock())
        body = orjson.dumps(webhook_body(delivery, sent_at), option=orjson.OPT_SORT_KEYS)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "tracing-eval",
            DELIVERY_HEADER: delivery_key,
            TIMESTAMP_HEADER: str(sent_at),
        }
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = sign(self._secret, body)
        pending = [u for u in self.urls if (delivery_key, u) not in self._done]
        outcomes = await asyncio.gather(*(self._post(u, body, headers) for u in pending), return_exceptions=True)
        errors: list[BaseException] = []
        for url, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                errors.append(outcome)
            else:
                self._remember(delivery_key, url)
        if not errors:
            return
        message = "; ".join(str(e) for e in errors)
        if all(isinstance(e, PermanentSinkError) for e in errors):
            raise PermanentSinkError(message)
        raise WebhookError(message)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        shown = f"url {self.urls.index(url) + 1} ({shown_url(url)})"
        try:
            resp = await self._client.post(url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise WebhookError(f"{shown}: timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise WebhookError(f"{shown}: {type(exc).__name__}: {str(exc).replace(url, shown)}") from None
        status = resp.status_code
        if 200 <= status < 300:
            return
        detail = f"{shown}: HTTP {status} {resp.text[:200].replace(url, shown)!r}"
        if status >= 500 or status in _RETRYABLE_4XX:
            raise WebhookError(detail)
        raise PermanentSinkError(detail)

    def _remember(self, delivery: str, url: str) -> None:
        self._done[(delivery, url)] = None
        while len(self._done) > _REMEMBERED:
            self._done.popitem(last=False)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
