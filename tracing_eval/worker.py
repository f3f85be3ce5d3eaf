"""Lifecycle of the sidecar: the scheduler's jobs (tick, delivery, retention), the HTTP server with the
sources' routes, and draining on SIGTERM. What it runs is built by `tracing_eval.app`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from typing import Any

import structlog
import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from tracing_eval.config import Settings
from tracing_eval.pipeline import Pipeline, TickStats
from tracing_eval.server import Server, bind, http_app
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)

STALE_TICKS = 3  # /readyz: the scheduler must have finished a tick within this many intervals (+ slack)
TICK_SLACK_SECONDS = 1.0
STORE_TIMEOUT_SECONDS = 5.0  # /readyz and /metrics: how long the store may take to answer
#: After `drain_seconds`, how long giving back leases may take before the worker exits anyway
RELEASE_TIMEOUT_SECONDS = 5.0


#: Generation-0 threshold of the garbage collector in a running sidecar (Python's default is 700). An
#: evaluation allocates many objects that live for the whole batch (spans, messages, results), so
#: with the default the collector scans them again and again: about 10% of a drain's CPU.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Freeze what start-up allocated (imports, settings: never garbage) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class Worker:
    """The long-running sidecar: ticks on a schedule, serves HTTP (with the routes of the pipeline's
    sources), drains on SIGTERM.

    Its `/metrics` serve the pipeline's telemetry (build the sources with the same one); a pipeline
    built without telemetry gets a new one here."""

    def __init__(self, settings: Settings, pipeline: Pipeline) -> None:
        self.settings = settings
        self.pipeline = pipeline
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
        """A tick, and at once another while the last one's time ran out with threads still ready: a
        backlog drains without idling until the next interval, and each tick still pulls the sources
        and shows the health check that it finished. Returns the last tick's stats."""
        async with self._tick_lock:
            stats = None
            while not self._stop.is_set():
                self._tick_started = time.monotonic()
                try:
                    stats = await self.pipeline.tick(deliver=False)
                except Exception:
                    self.telemetry.tick_failures.inc()
                    log.exception("tick failed; the next tick retries")
                    return None
                finally:
                    self._tick_finished = time.monotonic()
                if not stats.more:
                    break
            return stats

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
        sources = list(self.pipeline.sources)
        cfg = uvicorn.Config(  # log_config=None: uvicorn's own messages go through our log format
            http_app([route for source in sources for route in source.routes()], self),
            log_level="warning",
            log_config=None,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=max(1, int(drain)),
        )
        server = Server(cfg)
        started = []
        try:
            for source in sources:
                await source.start()
                started.append(source)
        except BaseException:
            await asyncio.gather(*(s.stop(0) for s in started), return_exceptions=True)
            sock.close()
            raise
        server_task = asyncio.create_task(server.serve(sockets=[sock]))
        scheduler.start()
        log.info(
            "tracing-eval running",
            http=self.settings.http.address,
            sources=[s.name for s in sources],
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
        await self._shut_down(server, server_task, drain)
        log.info("stopped")

    async def _shut_down(self, server: uvicorn.Server, server_task: asyncio.Task[None], drain: float) -> None:
        """Within `drain` seconds: stop the HTTP server and the sources (requests in progress may
        finish; a body still arriving is cut off), finish the tick and flush the outbox, side by side;
        then give back the leases (RELEASE_TIMEOUT_SECONDS more at most). Nothing waits past that;
        whoever opened the pipeline closes its sources and sinks (`Pipeline.close`)."""
        server.should_exit = True
        stopping = [server_task, asyncio.create_task(self._finish(drain))]
        stopping += [asyncio.create_task(source.stop(drain)) for source in self.pipeline.sources]
        _, late = await asyncio.wait(stopping, timeout=drain + 0.5)
        for task in late:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        if late:
            log.warning("drain deadline passed; cut off what was still running", tasks=len(late))
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
