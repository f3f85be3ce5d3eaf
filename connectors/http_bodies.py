"""An httpx client that lets go of what it sent and received as soon as a response is read.

httpx 0.28 leaves each response in a reference cycle with the stream bound to it, and the request
(with its body) hangs off it, so both bodies are freed only when the garbage collector reaches the
cycle. The sidecar's collector runs rarely (`worker.tune_gc`): a long delivery round of the OTLP sink
(about 350 KiB per request of 500 events) grew the process by about 200 MiB before a collection
freed them (`docs/reliability.md`, "Memory while the outbox drains"), and every page a source read
stayed in memory as long. Without the bound stream, the response, its request and both bodies go
with the last reference.
"""

from __future__ import annotations

from typing import Any

import httpx


class ReleasingClient(httpx.AsyncClient):
    """An httpx client whose responses, once read, are no longer tied into a reference cycle (a
    streamed response is left as it is)."""

    async def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        response = await super().send(request, stream=stream, **kwargs)
        if not stream:
            response.stream = httpx.ByteStream(b"")  # read already: the bound stream is what closes the cycle
        return response
