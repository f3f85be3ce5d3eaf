"""Request and response bodies that httpx lets go as soon as they are done with.

httpx 0.28 leaves each response in a reference cycle with the stream bound to it, and the request
(with its body) hangs off it, so both bodies are freed only when the garbage collector reaches the
cycle. The sidecar's collector runs rarely (`worker.tune_gc`): a long delivery round of the OTLP sink
(about 350 KiB per request of 500 events) grew the process by about 200 MiB before a collection
freed them (`docs/reliability.md`, "Memory while the outbox drains"), and every page a source reads
stays in memory as long. A request body sent as a one-shot stream with its length is dropped once
written (`one_shot`); a response read by a `ReleasingClient` goes with its last reference.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


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


class ReleasingClient(httpx.AsyncClient):
    """An httpx client whose responses, once read, are no longer tied into a reference cycle: their
    bodies go with the last reference (a streamed response is left as it is)."""

    async def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        response = await super().send(request, stream=stream, **kwargs)
        if not stream:
            response.stream = httpx.ByteStream(b"")  # read already: the bound stream is what closes the cycle
        return response


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body
