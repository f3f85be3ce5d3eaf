"""Lifecycle of the sidecar: wire sources, sinks and store; run the scheduler and HTTP server.

This is the one place (with the CLI) that knows the connectors: it builds them by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog
import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from connectors.otlp.file_source import OtlpFileSource
from connectors.otlp.receiver import OtlpReceiver
from tracing_eval.config import ConfigError, Settings
from tracing_eval.judge import JudgeCache, JudgeClient
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.pipeline import Pipeline, TickStats
from tracing_eval.routing import unknown_destinations
from tracing_eval.sinks import LOCAL, Sink
from tracing_eval.sources import Source
from tracing_eval.store.sql import SqlStore

log = structlog.get_logger(__name__)

OTLP_HTTP = "otlp-http"
OTLP_FILE = "otlp-file:"
LANGFUSE = "langfuse"
OTLP = "otlp"
WEBHOOK = "webhook"
KNOWN_SINKS = (LOCAL, LANGFUSE, OTLP, WEBHOOK)


@dataclass(frozen=True)
class SourcePlan:
    """What `--source` asked for: the receiver, files to pull, and/or Langfuse."""

    otlp_http: bool
    files: tuple[Path, ...]
    langfuse: bool = False


def plan_sources(specs: Sequence[str] | None, settings: Settings) -> SourcePlan:
    """Turn `--source` specs (or the config's sources) into a plan; unknown specs are errors."""
    if not specs:
        s = settings.sources
        return SourcePlan(s.otlp_http, tuple(s.otlp_files), s.langfuse)
    http, files, langfuse = False, [], False
    for spec in specs:
        if spec == OTLP_HTTP:
            http = True
        elif spec.startswith(OTLP_FILE) and spec[len(OTLP_FILE) :]:
            files.append(Path(spec[len(OTLP_FILE) :]))
        elif spec == LANGFUSE:
            langfuse = True
        else:
            raise ConfigError(f"unknown source {spec!r}; expected {OTLP_HTTP}, {OTLP_FILE}PATH or {LANGFUSE}")
    return SourcePlan(http, tuple(files), langfuse)


def sink_names(names: Sequence[str] | None, settings: Settings, plan: SourcePlan) -> list[str]:
    """The sinks to run: `--sink` (or config), plus `langfuse` when Langfuse is a source."""
    wanted = list(dict.fromkeys(list(names) if names else list(settings.sinks.enabled)))
    if plan.langfuse and LANGFUSE not in wanted:
        wanted.append(LANGFUSE)  # scores go back to Langfuse for threads read from it
    unknown = [n for n in wanted if n not in KNOWN_SINKS]
    if unknown:
        raise ConfigError(f"unknown or unavailable sink(s) {', '.join(unknown)}; available: {', '.join(KNOWN_SINKS)}")
    dangling = unknown_destinations(settings.review, [n for n in wanted if n in (LANGFUSE, WEBHOOK)])
    if dangling:
        routes = "; ".join(f"{name}: {', '.join(dests)}" for name, dests in dangling.items())
        raise ConfigError(f"review routes send to sinks that are not enabled ({routes}); enable them with --sink")
    return wanted


def build_sinks(names: list[str], settings: Settings, store: SqlStore) -> list[Sink]:
    """Sink objects by name; `local` (the store and its review queue) needs no outbox."""
    sinks: list[Sink] = []
    if LANGFUSE in names:
        from connectors.langfuse import LangfuseSink

        sinks.append(LangfuseSink(settings.langfuse, store=store))
    if OTLP in names:
        from connectors.otlp.sink import OtlpEvaluationSink

        sinks.append(OtlpEvaluationSink(settings.sinks.otlp))  # a missing endpoint is a ConfigError
    if WEBHOOK in names:
        from connectors.review.webhook import WebhookSink

        if not settings.sinks.webhook.urls:
            raise ConfigError("sink webhook: set [sinks.webhook] urls (TRACING_EVAL_SINKS__WEBHOOK__URLS)")
        sinks.append(WebhookSink(settings.sinks.webhook))
    return sinks


def build_sources(
    settings: Settings, plan: SourcePlan, *, complete_files: bool, since: datetime | None = None
) -> list[Source]:
    sources: list[Source] = [OtlpFileSource(p, complete=complete_files) for p in plan.files]
    if plan.langfuse:
        from connectors.langfuse import LangfuseSource

        sources.append(LangfuseSource(settings.langfuse, backfill_since=since))
    return sources


def build_store(settings: Settings) -> SqlStore:
    return SqlStore(settings.store.url, sample_rate=settings.sampling.rate)


def build_judge(settings: Settings, cache: JudgeCache | None = None) -> JudgeClient | None:
    """The judge client when a model and an API key are configured, else None (judge tier off)."""
    return JudgeClient.from_settings(settings.judge, cache)


def build_pipeline(
    settings: Settings,
    store: SqlStore,
    plan: SourcePlan,
    sinks: list[str],
    *,
    complete_files: bool,
    since: datetime | None = None,
) -> Pipeline:
    """Everything one worker needs, wired from settings; close it with `Pipeline.close()`."""
    metrics = build_metrics(settings)
    sources = build_sources(settings, plan, complete_files=complete_files, since=since)
    owner = f"{socket.gethostname()}:{os.getpid()}"
    judge = build_judge(settings, cache=store if settings.judge.cache else None)
    return Pipeline(
        store=store,
        settings=settings,
        metrics=metrics,
        owner=owner,
        sources=sources,
        sinks=build_sinks(sinks, settings, store),
        judge=judge,
    )


def http_app(receiver: OtlpReceiver | None) -> Starlette:
    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route("/healthz", healthz)]
    if receiver is not None:
        routes += receiver.routes()
    return Starlette(routes=routes)


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


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the worker decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Worker:
    """The long-running sidecar: ticks on a schedule, serves HTTP, drains on SIGTERM."""

    def __init__(self, settings: Settings, pipeline: Pipeline, receiver: OtlpReceiver | None) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.receiver = receiver
        self._tick_lock = asyncio.Lock()
        self._stop = asyncio.Event()

    async def tick(self) -> TickStats | None:
        async with self._tick_lock:
            if self._stop.is_set():
                return None
            try:
                return await self.pipeline.tick()
            except Exception:
                log.exception("tick failed; the next tick retries")
                return None

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        scheduler = AsyncIOScheduler(event_loop=loop)
        tick = self.settings.schedule.tick_seconds
        scheduler.add_job(
            self.tick, "interval", seconds=tick, max_instances=1, coalesce=True, misfire_grace_time=max(1, int(tick))
        )
        server = None
        server_task = None
        if self.receiver is not None:
            sock = bind(self.settings.http.host, self.settings.http.port)
            cfg = uvicorn.Config(http_app(self.receiver), log_level="warning", lifespan="off", access_log=False)
            server = _Server(cfg)
            server_task = asyncio.create_task(server.serve(sockets=[sock]))
        scheduler.start()
        log.info("tracing-eval running", http=self.settings.http.address if server else None, tick_seconds=tick)
        await self.tick()  # first tick right away
        stop_wait = asyncio.create_task(self._stop.wait())
        waiters = {stop_wait} | ({server_task} if server_task else set())
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if server_task in done and server_task is not None and server_task.exception():
            log.error("HTTP server stopped", error=str(server_task.exception()))
        self._stop.set()
        log.info("stopping: draining the current tick")
        scheduler.shutdown(wait=False)
        if server is not None and server_task is not None:
            server.should_exit = True
            with contextlib.suppress(Exception):
                await server_task
        async with self._tick_lock:  # wait for an in-flight tick to finish recording
            await self.pipeline.deliver()
        stop_wait.cancel()
        log.info("stopped")
