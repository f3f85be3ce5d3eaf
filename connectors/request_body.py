"""Request bodies that httpx lets go as soon as they are sent.

httpx 0.28 leaves each response in a reference cycle with the stream bound to it, and the request
and its body hang off that cycle, so a body is freed only when the garbage collector reaches the
cycle. The sidecar's collector runs rarely (`worker.tune_gc`), and a long delivery round of the OTLP
sink (about 350 KiB per request of 500 events) grew the process by about 200 MiB before a collection
freed them (`docs/reliability.md`, "Memory while the outbox drains"). A body sent as a one-shot
stream with its length is dropped once written; the request still carries a `Content-Length`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any


def one_shot(body: bytes, content_type: str | None = None) -> dict[str, Any]:
    """The `content` and `headers` arguments of an httpx request that sends `body` once, with its
    length (a redirect cannot send it again: use it where redirects are not followed; a retry
    needs a new one)."""
    headers = {"content-length": str(len(body))}
    if content_type is not None:
        headers["content-type"] = content_type
    return {"content": _once(body), "headers": headers}


def json_body(value: Any) -> bytes:
    """`value` as httpx's `json=` argument encodes it (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body
