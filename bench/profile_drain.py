"""Where a backlog drain spends its CPU, per 10-turn thread: load, assemble, metrics, record.

    .venv/bin/python bench/profile_drain.py                       # 1,000 conversations
    .venv/bin/python bench/profile_drain.py --cprofile 30         # and the 30 costliest functions
    .venv/bin/python bench/profile_drain.py --steady              # turn by turn, not a backlog
    .venv/bin/python bench/profile_drain.py --sink otlp --telemetry   # delivered, and counted as the sidecar does

`bench/workload.py` conversations are ingested into a new SQLite file (not timed), then one process
pinned to core 0 runs the real `Pipeline` with the deterministic pack and no sink until every thread
is evaluated (`tick(settle_all=True)`). Each stage's CPU time (`time.process_time`, so the SQLite
thread's work is counted too) is summed by wrapping the store's and the engine's functions:

- load: `SqlStore.load_threads` (the queries, reading spans and their histories back);
- assemble: `assemble.parts_from_stored` and `thread_from_parts` (stored turns as they are, the other
  traces assembled);
- metrics: `evaluate.evaluate_all`;
- record: `SqlStore.record_many` (results, outbox rows, stored turns; one transaction per batch);
- claim: `SqlStore.claim`;
- other: the rest of the tick's CPU (each result made a record with its id and anchor, review
  routing, logging, the event loop);
- deliver (with a sink; of which taking the rows, renewing their leases, marking them done): `Pipeline.deliver`, the outbox taken, every result sent as an evaluation
  event by the OTLP sink to an endpoint in a child process (its CPU is not counted), rows marked done;
  with `--sink langfuse`: every `ok` result written as a score by the Langfuse sink to the fake
  Langfuse server of the tests (`tests/support/fakes/langfuse_server.py`, v4) in a child process.

With `--steady` the conversations arrive turn by turn instead of as a backlog, on a fake clock: every
conversation's next turn is stored, then a tick evaluates the turns that settled (turn evaluations),
and after the last turn the threads go idle and are evaluated whole. The figures are per conversation
and cover all of its evaluations (the ingest is not timed).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import logging
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin, table  # noqa: E402

SPENT: dict[str, float] = {}


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - started

        return wrapper

    @functools.wraps(fn)
    def plain(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - started

    return plain


async def run(args: argparse.Namespace) -> None:
    import structlog
    import workload

    from tracing_eval import pipeline
    from tracing_eval.config import DETERMINISTIC_PACK, Settings
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress
    from tracing_eval.ingest import make_batch
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.store.sql import SqlStore
    from tracing_eval.telemetry import Telemetry
    from tracing_eval.worker import tune_gc

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    wl = workload.build(args.conversations, args.turns)
    with tempfile.TemporaryDirectory(prefix="tracing-eval-drain-") as tmp:
        store = SqlStore(f"sqlite+aiosqlite:///{tmp}/store.db")
        await store.open()
        spans = [s for body in wl.bodies for s in decode_traces(decompress(body, "gzip", 1 << 30), PROTOBUF).spans]
        rounds = turn_rounds(spans, make_batch(spans, []).conversations) if args.steady else [spans]
        if not args.steady:
            await ingest_all(store, spans, 0.0)
        for name in ("load_threads", "record_many", "claim"):
            setattr(SqlStore, name, timed(name.split("_")[0], getattr(SqlStore, name)))
        pipeline.parts_from_stored = timed("assemble", pipeline.parts_from_stored)
        pipeline.thread_from_parts = timed("assemble", pipeline.thread_from_parts)
        pipeline.evaluate_all = timed("metrics", pipeline.evaluate_all)
        settings = Settings(
            metrics={"enabled": DETERMINISTIC_PACK},
            schedule={"batch_size": args.batch, "turn_settle_seconds": SETTLE, "thread_idle_seconds": IDLE},
        )
        sinks: list[Any] = []
        collector = None
        if args.sink == "otlp":
            from tracing_eval.connectors.otlp.sink import OtlpEvaluationSink
            from tracing_eval.connectors.otlp.sink_settings import OtlpSinkSettings

            collector = subprocess.Popen(
                [sys.executable, "-c", COLLECTOR], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
            )
            assert collector.stdout is not None
            endpoint = collector.stdout.readline().strip()
            sinks = [OtlpEvaluationSink(OtlpSinkSettings(endpoint=endpoint))]
            pipeline.Pipeline.deliver = timed("deliver", pipeline.Pipeline.deliver)
        elif args.sink == "langfuse":
            from tracing_eval.connectors.langfuse import LangfuseSettings, LangfuseSink

            collector = subprocess.Popen(
                [sys.executable, "-c", FAKE_LANGFUSE], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
            )
            assert collector.stdout is not None
            base_url = collector.stdout.readline().strip()
            lf = LangfuseSettings(base_url=base_url, public_key="pk-lf-test", secret_key="sk-lf-test")
            sinks = [LangfuseSink(lf)]
            pipeline.Pipeline.deliver = timed("deliver", pipeline.Pipeline.deliver)
        if sinks:  # parts of `deliver`, listed under it
            for name, stage in (
                ("pending_outbox", "  of which take rows"),
                ("renew_outbox", "  of which renew leases"),
                ("renew_outbox_many", "  of which renew leases"),
                ("outbox_done", "  of which mark done"),
            ):
                setattr(SqlStore, name, timed(stage, getattr(SqlStore, name)))
        clock = [0.0]
        p = pipeline.Pipeline(
            store=store,
            settings=settings,
            metrics=build_metrics(settings),
            owner="profile",
            sinks=sinks,
            clock=lambda: clock[0],
            telemetry=Telemetry() if args.telemetry else None,
        )
        tune_gc()  # as `tracing-eval run` does
        profiler = cProfile.Profile() if args.cprofile else None
        stats = pipeline.TickStats()
        wall = cpu = 0.0
        for n, turn in enumerate(rounds):  # with --steady: every conversation's next turn, then a tick
            if args.steady:
                clock[0] = n * ROUND_SECONDS
                await ingest_all(store, turn, clock[0])
                clock[0] += SETTLE + 1  # settled, not idle: the turns are evaluated
                if n == len(rounds) - 1:
                    clock[0] += IDLE  # the conversations end: the threads are evaluated
            started, started_cpu = time.perf_counter(), time.process_time()
            if profiler is not None:
                profiler.enable()
            tick = await p.tick(settle_all=not args.steady, deliver=False)
            if sinks:  # the worker delivers on a schedule of its own; here once every result is recorded
                while (await p.deliver()).delivered:
                    pass
            if profiler is not None:
                profiler.disable()
            wall += time.perf_counter() - started
            cpu += time.process_time() - started_cpu
            stats.threads_evaluated += tick.threads_evaluated
            stats.turn_evaluations += tick.turn_evaluations
        backlog = await store.outbox_backlog()
        await store.close()
        for sink in sinks:
            await sink.aclose()
        if collector is not None:
            records, _ = collector.communicate("")
            what = "events received by the endpoint" if args.sink == "otlp" else "scores in the fake Langfuse"
            print(f"outbox left: {backlog}; {what}: {records.strip()}")
    n = stats.threads_evaluated
    order = [k for k in SPENT if not k.startswith(" ")]
    if "deliver" in order:  # its parts right under it
        at = order.index("deliver") + 1
        order[at:at] = [k for k in SPENT if k.startswith(" ")]
    rows = [[name, f"{SPENT[name] * 1000 / n:.2f}", f"{SPENT[name] / cpu:.0%}"] for name in order]
    other = cpu - sum(SPENT[name] for name in order if not name.startswith(" "))
    rows.append(
        [
            "other (results to records, review routing, logging, the event loop)",
            f"{other * 1000 / n:.2f}",
            f"{other / cpu:.0%}",
        ]
    )
    rows.append(["total CPU", f"{cpu * 1000 / n:.2f}", "100%"])
    print(f"{n} threads of {args.turns} turns: {n / wall:.1f} threads/s wall, {n / cpu:.1f} threads per CPU second")
    if args.steady:
        print(f"evaluations: {stats.turn_evaluations} of turns as they settled, {n} of idle threads")
    print(table(["stage", "CPU ms per thread", "share"], rows))
    if profiler is not None:
        profiler.dump_stats(str(Path(tempfile.gettempdir()) / "profile_drain.prof"))
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.cprofile)


#: with --steady: seconds between a conversation's turns, turn settle and thread idle (a fake clock)
ROUND_SECONDS, SETTLE, IDLE = 1000.0, 60.0, 300.0


def turn_rounds(spans: list[Any], conversations: dict[str, str]) -> list[list[Any]]:
    """The spans as rounds: round n holds the n-th turn (trace, by start time) of every conversation
    (`conversations`: trace id -> conversation id)."""
    traces: dict[str, list[Any]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    by_conversation: dict[str, list[list[Any]]] = {}
    for trace_id, trace in traces.items():
        by_conversation.setdefault(conversations[trace_id], []).append(trace)
    rounds: list[list[Any]] = []
    for turns in by_conversation.values():
        turns.sort(key=lambda trace: min(s.start_ns for s in trace))
        for n, trace in enumerate(turns):
            if n == len(rounds):
                rounds.append([])
            rounds[n] += trace
    return rounds


async def ingest_all(store: Any, spans: list[Any], now: float) -> None:
    """Store `spans` (not timed), 300 to a batch as an exporter sends them."""
    from tracing_eval.ingest import make_batch

    for at in range(0, len(spans), 300):
        await store.ingest(make_batch(spans[at : at + 300], []), now)


COLLECTOR = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import soak
c = soak.Collector()
print(c.endpoint, flush=True)
sys.stdin.read()
c.close()
print(c.counts["records"], flush=True)
"""


FAKE_LANGFUSE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from tests.support.fakes.langfuse_server import FakeLangfuseServer
server = FakeLangfuseServer("v4").start()
print(server.base_url, flush=True)
sys.stdin.read()
print(len(server.scores), flush=True)
server.stop()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--batch", type=int, default=100, help="threads claimed (and recorded) per batch")
    ap.add_argument(
        "--sink", choices=("none", "otlp", "langfuse"), default="none", help="otlp, langfuse: deliver every result too"
    )
    ap.add_argument(
        "--steady",
        action="store_true",
        help="turn by turn: every turn evaluated as it settles, each thread once idle (not a backlog)",
    )
    ap.add_argument(
        "--telemetry", action="store_true", help="count in the Prometheus series, as `tracing-eval run` does"
    )
    ap.add_argument("--cprofile", type=int, default=0, metavar="N", help="print the N costliest functions")
    args = ap.parse_args()
    pin(0)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
