"""The sidecar's HTTP server: `/healthz`, `/readyz`, `/metrics` and the routes of its sources (the OTLP
receiver's `/v1/traces` and `/v1/logs`), on one socket bound up front."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tracing_eval.settings_base import ConfigError

#: Largest request head (request line and headers) accepted; more is answered 431
MAX_HEADER_BYTES = 16 * 1024


class Probed(Protocol):
    """What `/readyz` and `/metrics` ask (the worker)."""

    async def readiness(self) -> dict[str, Any]: ...

    async def scrape(self) -> bytes: ...


class HeaderLimit:
    """Answer 431 to a request whose headers pass MAX_HEADER_BYTES (uvicorn only limits headers that
    arrive in pieces; a whole head in one read is parsed at any size)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path", b"")) + sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            if size > MAX_HEADER_BYTES:
                response = PlainTextResponse(
                    f"request headers are {size} bytes; the limit is {MAX_HEADER_BYTES}", status_code=431
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(routes: Sequence[BaseRoute] = (), worker: Probed | None = None) -> Starlette:
    """`/healthz`; with a worker `/readyz` and `/metrics`; then `routes` (those of the sources)."""

    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    served: list[BaseRoute] = [Route("/healthz", healthz)]
    if worker is not None:

        async def readyz(_: Request) -> JSONResponse:
            body = await worker.readiness()
            return JSONResponse(body, status_code=200 if body["ready"] else 503)

        async def metrics(_: Request) -> Response:
            return Response(await worker.scrape(), media_type=CONTENT_TYPE_LATEST)

        served += [Route("/readyz", readyz), Route("/metrics", metrics)]
    return Starlette(routes=[*served, *routes], middleware=[Middleware(HeaderLimit)])


def bind(host: str, port: int) -> socket.socket:
    """Bind the HTTP socket up front so a taken port is a clear error, not a crash later."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; set --http or [http] address") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class Server(uvicorn.Server):
    """uvicorn without its own signal handling: the worker decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
