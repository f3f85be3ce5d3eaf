"""Lifecycle of the sidecar: wire sources, sinks and store; run the scheduler and HTTP server.

This is the one place (with the CLI) that knows the connectors: it builds them by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tracing_eval.config import ConfigError, Settings
from tracing_eval.connectors.otlp.file_source import OtlpFileSource
from tracing_eval.connectors.otlp.grpc_receiver import GrpcBindError, OtlpGrpcReceiver
from tracing_eval.connectors.otlp.receiver import OtlpReceiver
from tracing_eval.judge import JudgeCache, JudgeClient, JudgeObserver
from tracing_eval.metrics.catalogue import build_metrics
from tracing_eval.pipeline import Pipeline, TickStats
from tracing_eval.routing import unknown_destinations
from tracing_eval.sinks import LOCAL, Sink
from tracing_eval.sources import Source
from tracing_eval.store.sql import SqlStore
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)

OTLP_HTTP = "otlp-http"
OTLP_FILE = "otlp-file:"
LANGFUSE = "langfuse"
OTLP = "otlp"
WEBHOOK = "webhook"
KNOWN_SINKS = (LOCAL, LANGFUSE, OTLP, WEBHOOK)
STALE_TICKS = 3  # /readyz: the scheduler must have finished a tick within this many intervals (+ slack)
TICK_SLACK_SECONDS = 1.0
STORE_TIMEOUT_SECONDS = 5.0  # /readyz and /metrics: how long the store may take to answer
#: After `drain_seconds`, how long giving back leases may take before the worker exits anyway
RELEASE_TIMEOUT_SECONDS = 5.0
#: Largest request head (request line and headers) accepted; more is answered 431
MAX_HEADER_BYTES = 16 * 1024


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
        from tracing_eval.connectors.langfuse import LangfuseSink

        sinks.append(LangfuseSink(settings.langfuse, store=store))
    if OTLP in names:
        from tracing_eval.connectors.otlp.sink import OtlpEvaluationSink

        sinks.append(OtlpEvaluationSink(settings.sinks.otlp))  # a missing endpoint is a ConfigError
    if WEBHOOK in names:
        from tracing_eval.connectors.review.webhook import WebhookSink

        if not settings.sinks.webhook.urls:
            raise ConfigError("sink webhook: set [sinks.webhook] urls (TRACING_EVAL_SINKS__WEBHOOK__URLS)")
        sinks.append(WebhookSink(settings.sinks.webhook))
    return sinks


def build_sources(
    settings: Settings, plan: SourcePlan, *, complete_files: bool, since: datetime | None = None
) -> list[Source]:
    sources: list[Source] = [OtlpFileSource(p, complete=complete_files) for p in plan.files]
    if plan.langfuse:
        from tracing_eval.connectors.langfuse import LangfuseSource

        sources.append(LangfuseSource(settings.langfuse, backfill_since=since))
    return sources


def build_store(settings: Settings) -> SqlStore:
    return SqlStore(settings.store.url, sample_rate=settings.sampling.rate)


def build_judge(
    settings: Settings, cache: JudgeCache | None = None, observer: JudgeObserver | None = None
) -> JudgeClient | None:
    """The judge client when a model and an API key are configured, else None (judge tier off)."""
    return JudgeClient.from_settings(settings.judge, cache, observer)


def build_pipeline(
    settings: Settings,
    store: SqlStore,
    plan: SourcePlan,
    sinks: list[str],
    *,
    complete_files: bool,
    since: datetime | None = None,
    telemetry: Telemetry | None = None,
) -> Pipeline:
    """Everything one worker needs, wired from settings; close it with `Pipeline.close()`.
    With `telemetry`, the pipeline, its judge and its deliveries report to it."""
    metrics = build_metrics(settings)
    sources = build_sources(settings, plan, complete_files=complete_files, since=since)
    owner = f"{socket.gethostname()}:{os.getpid()}"
    judge = build_judge(settings, cache=store if settings.judge.cache else None, observer=telemetry)
    pipeline = Pipeline(
        store=store,
        settings=settings,
        metrics=metrics,
        owner=owner,
        sources=sources,
        sinks=build_sinks(sinks, settings, store),
        judge=judge,
        telemetry=telemetry,
    )
    if telemetry is not None:
        telemetry.prime(sinks=pipeline.outbox_sinks, sources=[s.name for s in sources])
    return pipeline


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


def http_app(receiver: OtlpReceiver | None, worker: Worker | None = None) -> Starlette:
    """`/healthz`; with a worker `/readyz` and `/metrics`; with a receiver `/v1/traces` and `/v1/logs`."""

    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route("/healthz", healthz)]
    if worker is not None:

        async def readyz(_: Request) -> JSONResponse:
            body = await worker.readiness()
            return JSONResponse(body, status_code=200 if body["ready"] else 503)

        async def metrics(_: Request) -> Response:
            return Response(await worker.scrape(), media_type=CONTENT_TYPE_LATEST)

        routes += [Route("/readyz", readyz), Route("/metrics", metrics)]
    if receiver is not None:
        routes += receiver.routes()
    return Starlette(routes=routes, middleware=[Middleware(HeaderLimit)])


#: Generation-0 threshold of the garbage collector in a running sidecar (Python's default is 700). An
#: evaluation allocates many objects that live for the whole batch (spans, messages, results), so
#: with the default the collector scans them again and again: about 10% of a drain's CPU.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Freeze what start-up allocated (imports, settings: never garbage) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


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
    """The long-running sidecar: ticks on a schedule, serves HTTP, drains on SIGTERM.

    Its `/metrics` serve the pipeline's telemetry (give the receiver the same one); a pipeline
    built without telemetry gets a new one here."""

    def __init__(self, settings: Settings, pipeline: Pipeline, receiver: OtlpReceiver | None) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.receiver = receiver
        if pipeline.telemetry is None:
            pipeline.telemetry = Telemetry()
        self.telemetry: Telemetry = pipeline.telemetry
        self._tick_lock = asyncio.Lock()
        self._deliver_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._scheduler: AsyncIOScheduler | None = None
        self._started = time.monotonic()
        self._tick_started: float | None = None
        self._tick_finished: float | None = None

    async def tick(self) -> TickStats | None:
        async with self._tick_lock:
            if self._stop.is_set():
                return None
            self._tick_started = time.monotonic()
            try:
                return await self.pipeline.tick(deliver=False)
            except Exception:
                self.telemetry.tick_failures.inc()
                log.exception("tick failed; the next tick retries")
                return None
            finally:
                self._tick_finished = time.monotonic()

    async def deliver(self) -> None:
        """One delivery round, on its own schedule next to the ticks: a long evaluation does not hold
        up deliveries, nor a long delivery round the evaluations."""
        async with self._deliver_lock:
            if self._stop.is_set():
                return
            try:
                await self.pipeline.deliver()
            except Exception:
                log.exception("delivery round failed; the next one retries")

    async def retain(self) -> None:
        """One retention run, on its own schedule: it deletes in short transactions, so ticks,
        deliveries and the receiver go on beside it."""
        if self._stop.is_set():
            return
        try:
            await self.pipeline.retain()
        except Exception:
            log.exception("retention run failed; the next one retries")

    async def scrape(self) -> bytes:
        """`/metrics`: refresh the gauges read from the store and those kept in memory, then the
        Prometheus text."""
        try:
            await asyncio.wait_for(self.pipeline.observe_store(), STORE_TIMEOUT_SECONDS)
        except Exception as exc:  # the rest of the series are still worth serving
            self.telemetry.store_up.set(0)
            log.warning("metrics: cannot read the store", error=f"{type(exc).__name__}: {exc}")
        # a delivery may fail while the store is read: set the in-memory gauges only now, with no
        # await before the text, so the failing time never lags the error counters it is served with
        self.pipeline.observe_memory()
        return self.telemetry.exposition()

    async def readiness(self) -> dict[str, Any]:
        """`/readyz`: the store answers, the scheduler runs and ticks, no sink fails for too long."""
        checks = {
            "store": await self._store_check(),
            "scheduler": self._scheduler_check(),
            "sinks": self._sinks_check(),
        }
        failed = [name for name, check in checks.items() if not check["ok"]]
        return {"ready": not failed, "failed": failed, "checks": checks}

    async def _store_check(self) -> dict[str, Any]:
        try:
            await asyncio.wait_for(self.pipeline.store.ping(), STORE_TIMEOUT_SECONDS)
        except TimeoutError:
            return {"ok": False, "detail": f"the store did not answer within {STORE_TIMEOUT_SECONDS:g} s"}
        except Exception as exc:
            return {"ok": False, "detail": f"the store did not answer: {type(exc).__name__}: {exc}"}
        return {"ok": True, "detail": "the store answers"}

    def _scheduler_check(self) -> dict[str, Any]:
        if self._scheduler is None or not self._scheduler.running or self._stop.is_set():
            return {"ok": False, "detail": "the scheduler is not running"}
        now, schedule = time.monotonic(), self.settings.schedule
        started, finished = self._tick_started, self._tick_finished
        if started is not None and (finished is None or started > finished):
            running = now - started  # a long tick is fine until its leases run out
            ok = running <= max(schedule.lease_seconds, STALE_TICKS * schedule.tick_seconds)
            return {
                "ok": ok,
                "detail": f"a tick has been running for {running:.1f} s",
                "lease_seconds": schedule.lease_seconds,
            }
        limit = STALE_TICKS * schedule.tick_seconds + TICK_SLACK_SECONDS
        since = now - (finished if finished is not None else self._started)
        what = "the last tick finished" if finished is not None else "started, no tick yet,"
        return {"ok": since <= limit, "detail": f"{what} {since:.1f} s ago", "limit_seconds": limit}

    def _sinks_check(self) -> dict[str, Any]:
        threshold = self.settings.http.sink_failure_threshold_seconds
        if threshold <= 0:
            return {"ok": True, "detail": "sinks are not checked (sink_failure_threshold_seconds = 0)"}
        failing = self.telemetry.failing_sinks(time.time(), threshold)
        detail = (
            "; ".join(f"{sink} has failed every delivery for {secs:.0f} s" for sink, secs in sorted(failing.items()))
            or "no sink is failing"
        )
        return {"ok": not failing, "detail": detail, "failing_seconds": failing, "threshold_seconds": threshold}

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        scheduler = self._scheduler = AsyncIOScheduler(event_loop=loop)
        tick = self.settings.schedule.tick_seconds
        for job in (self.tick, self.deliver):
            scheduler.add_job(
                job, "interval", seconds=tick, max_instances=1, coalesce=True, misfire_grace_time=max(1, int(tick))
            )
        retention = self.settings.retention
        if retention.enabled:
            every = retention.interval_seconds
            scheduler.add_job(
                self.retain, "interval", seconds=every, max_instances=1, coalesce=True, misfire_grace_time=int(every)
            )
        sock = bind(self.settings.http.host, self.settings.http.port)  # health, readiness, metrics; OTLP too
        drain = self.settings.schedule.drain_seconds
        cfg = uvicorn.Config(  # log_config=None: uvicorn's own messages go through our log format
            http_app(self.receiver, self),
            log_level="warning",
            log_config=None,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=max(1, int(drain)),
        )
        server = _Server(cfg)
        grpc = await self._start_grpc()
        server_task = asyncio.create_task(server.serve(sockets=[sock]))
        scheduler.start()
        log.info(
            "tracing-eval running",
            http=self.settings.http.address,
            receiver=self.receiver is not None,
            grpc=self.settings.receiver.grpc_address if grpc is not None else None,
            tick_seconds=tick,
        )
        await self.tick()  # first tick right away
        stop_wait = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({stop_wait, server_task}, return_when=asyncio.FIRST_COMPLETED)
        if server_task in done and server_task.exception():
            log.error("HTTP server stopped", error=str(server_task.exception()))
        self._stop.set()
        stop_wait.cancel()
        log.info("stopping: draining the current tick", drain_seconds=drain)
        scheduler.shutdown(wait=False)
        await self._shut_down(server, server_task, grpc, drain)
        log.info("stopped")

    async def _start_grpc(self) -> OtlpGrpcReceiver | None:
        """The OTLP/gRPC receiver beside the HTTP one, when `[receiver] grpc_address` is set. A default
        address that is taken is a warning (gRPC stays off); an address set explicitly must be free."""
        address = self.settings.receiver.grpc_address
        if self.receiver is None or not address:
            return None
        grpc = OtlpGrpcReceiver(self.receiver.intake, self.settings.receiver)
        try:
            await grpc.start(address)
        except GrpcBindError as exc:
            if "grpc_address" in self.settings.receiver.model_fields_set:
                raise ConfigError(f"{exc}; set [receiver] grpc_address (empty: no gRPC)") from None
            log.warning("OTLP/gRPC is off: its default address is taken", error=str(exc))
            return None
        return grpc

    async def _shut_down(
        self, server: uvicorn.Server, server_task: asyncio.Task[None], grpc: OtlpGrpcReceiver | None, drain: float
    ) -> None:
        """Within `drain` seconds: stop the servers (requests in progress may finish; a body still
        arriving is cut off), finish the tick and flush the outbox, side by side; then give back the
        leases (RELEASE_TIMEOUT_SECONDS more at most). Nothing waits past that."""
        server.should_exit = True
        stopping = [server_task, asyncio.create_task(self._finish(drain))]
        if grpc is not None:
            stopping.append(asyncio.create_task(grpc.stop(drain)))
        _, late = await asyncio.wait(stopping, timeout=drain + 0.5)
        for task in late:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        if late:
            log.warning("drain deadline passed; cut off what was still running", tasks=len(late))
        if self.receiver is not None:
            self.receiver.intake.close()
        await self._release_leases()

    async def _finish(self, seconds: float) -> None:
        async def finish() -> None:
            async with self._tick_lock, self._deliver_lock:  # wait for the in-flight tick and delivery round
                await self.pipeline.deliver()

        try:
            await asyncio.wait_for(finish(), seconds)
        except TimeoutError:
            log.warning("drain deadline passed; the outbox keeps what was not delivered")
        except Exception as exc:  # e.g. the store is gone: nothing acknowledged is lost, it stays queued
            log.error("final delivery failed; the outbox keeps it for the next start", error=str(exc))

    async def _release_leases(self) -> None:
        try:
            released = await asyncio.wait_for(
                self.pipeline.store.release_owned(self.pipeline.owner), RELEASE_TIMEOUT_SECONDS
            )
        except Exception as exc:  # a timeout too
            log.error(
                "could not give back leases; they expire after lease_seconds", error=f"{type(exc).__name__}: {exc}"
            )
        else:
            if released:
                log.info("gave back leases", threads=released)
