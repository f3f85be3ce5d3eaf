"""Where the full OTLP ingest path spends its time, on one core (diagnostic, not a benchmark).

Runs the same sequence as `ingest.py --modes full` (per request: decode, `make_batch`,
`SqlStore.ingest`) and splits each span's cost into

- decode / normalise / persist, wall and CPU of the event-loop thread;
- inside persist: the SQLite calls aiosqlite runs on its worker thread, by operation (execute,
  executemany, commit: the fsync is in commit), timed in that thread;
- garbage-collector pauses (gc.callbacks), with the collector set up as `tracing-eval run` does
  (`tune_gc`; `--default-gc` for Python's default);
- optionally (`--cprofile N`) the top N functions of the event-loop thread by own time.

`--pragma NAME=VALUE` (repeatable) runs extra SQLite pragmas after the store's own, for what-ifs
such as `synchronous=OFF` (the fsync cost) or `wal_autocheckpoint=0` (the checkpoint cost); the
product itself uses WAL, synchronous=FULL and the default autocheckpoint.

    .venv/bin/python bench/profile_ingest.py --cprofile 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pin, table  # noqa: E402

LIMIT = 64 * 1024 * 1024


class SqliteThreadTimer:
    """Wraps aiosqlite's hand-off so each call is timed on the SQLite worker thread itself."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def install(self) -> None:
        import aiosqlite.core

        original = aiosqlite.core.Connection._execute
        timer = self

        async def _execute(conn: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            name = getattr(fn, "__name__", type(fn).__name__)

            def timed() -> Any:
                w, c = time.perf_counter(), time.thread_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    timer.wall[name] += time.perf_counter() - w
                    timer.cpu[name] += time.thread_time() - c
                    timer.calls[name] += 1

            return await original(conn, timed)

        aiosqlite.core.Connection._execute = _execute  # type: ignore[method-assign]


class GcTimer:
    def __init__(self) -> None:
        self.total = 0.0
        self.collections = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start
            self.collections += 1


async def run(
    bodies: list[bytes], db: Path, sqlite_timer: SqliteThreadTimer, prof: cProfile.Profile | None
) -> dict[str, Any]:
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress
    from tracing_eval.ingest import make_batch
    from tracing_eval.store.sql import SqlStore

    store = SqlStore(f"sqlite+aiosqlite:///{db}")
    await store.open()
    sqlite_timer.wall.clear(), sqlite_timer.cpu.clear(), sqlite_timer.calls.clear()
    wall = {"decode": 0.0, "normalise": 0.0, "persist": 0.0}
    cpu = dict(wall)
    spans = 0
    gc_timer = GcTimer()
    gc.callbacks.append(gc_timer)
    if prof:
        prof.enable()
    for body in bodies:
        w0, c0 = time.perf_counter(), time.thread_time()
        decoded = decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF)
        w1, c1 = time.perf_counter(), time.thread_time()
        batch = make_batch(decoded.spans, [], source="otlp")
        w2, c2 = time.perf_counter(), time.thread_time()
        await store.ingest(batch, time.time())
        w3, c3 = time.perf_counter(), time.thread_time()
        wall["decode"] += w1 - w0
        wall["normalise"] += w2 - w1
        wall["persist"] += w3 - w2
        cpu["decode"] += c1 - c0
        cpu["normalise"] += c2 - c1
        cpu["persist"] += c3 - c2
        spans += len(decoded.spans)
    if prof:
        prof.disable()
    gc.callbacks.remove(gc_timer)
    during = {k: dict(getattr(sqlite_timer, k)) for k in ("wall", "cpu", "calls")}  # the timed loop only
    close_wall = time.perf_counter()
    await store.close()  # with checkpoints deferred, closing copies the WAL into the database
    return {
        "spans": spans,
        "wall": wall,
        "cpu": cpu,
        "gc_s": gc_timer.total,
        "gc_collections": gc_timer.collections,
        "sqlite": during,
        "close_s": time.perf_counter() - close_wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument(
        "--pragma", action="append", default=[], metavar="NAME=VALUE", help="what-if: extra SQLite pragma (repeatable)"
    )
    ap.add_argument(
        "--default-gc", action="store_true", help="what-if: Python's default collector instead of `tune_gc`"
    )
    ap.add_argument(
        "--cprofile", type=int, default=0, metavar="N", help="print the top N functions of the event-loop thread"
    )
    args = ap.parse_args()

    import workload

    wl = workload.build(args.conversations, args.turns)
    gc.collect()  # start from the heap a receiver would have, not the SDK objects that built the payloads
    pin(0)  # before the store starts aiosqlite's thread, so it inherits the affinity
    if args.pragma:
        import tracing_eval.store.sql as sql

        product_pragmas = sql._sqlite_pragmas

        def pragmas(dbapi_conn: Any, record: Any) -> None:
            product_pragmas(dbapi_conn, record)
            cur = dbapi_conn.cursor()
            for p in args.pragma:
                cur.execute(f"PRAGMA {p}")
            cur.close()

        sql._sqlite_pragmas = pragmas  # diagnostic only: SqlStore registers this hook when constructed
    if not args.default_gc:  # as `tracing-eval run` sets it up
        from tracing_eval.worker import tune_gc

        tune_gc()
    sqlite_timer = SqliteThreadTimer()
    sqlite_timer.install()
    prof = cProfile.Profile() if args.cprofile else None
    with tempfile.TemporaryDirectory(prefix="tracing-eval-profile-") as tmp:
        r = asyncio.run(run(wl.bodies, Path(tmp) / "profile.db", sqlite_timer, prof))

    n = r["spans"]
    us = lambda seconds: f"{seconds * 1e6 / n:.1f}"  # noqa: E731
    total = sum(r["wall"].values())
    print(
        f"{n} spans, {wl.span_bytes / n / 1024:.2f} KiB each; extra pragmas: {', '.join(args.pragma) or 'none'}; "
        f"{n / total:,.0f} spans/s{' (under cProfile)' if prof else ''}\n"
    )
    rows = [
        [stage, us(r["wall"][stage]), us(r["cpu"][stage]), f"{r['wall'][stage] / total:.0%}"] for stage in r["wall"]
    ]
    rows.append(["total", us(total), us(sum(r["cpu"].values())), "100%"])
    print(table(["stage (event-loop thread)", "wall µs/span", "CPU µs/span", "share of wall"], rows))
    sq = r["sqlite"]
    sq_wall, sq_cpu = sum(sq["wall"].values()), sum(sq["cpu"].values())
    rows = [
        [name, sq["calls"][name], us(sq["wall"][name]), us(sq["cpu"][name])]
        for name in sorted(sq["wall"], key=sq["wall"].get, reverse=True)
        if sq["wall"][name] * 1e6 / n >= 0.05
    ]
    rows.append(["all SQLite calls", sum(sq["calls"].values()), us(sq_wall), us(sq_cpu)])
    rows.append(
        ["persist minus SQLite calls (Python, SQLAlchemy, hand-offs)", "", us(r["wall"]["persist"] - sq_wall), ""]
    )
    print("\n" + table(["inside persist: aiosqlite worker thread", "calls", "wall µs/span", "CPU µs/span"], rows))
    print(f"\nclosing the store after the run: {us(r['close_s'])} µs/span")
    print(
        f"\ngarbage collector: {r['gc_collections']} collections, {us(r['gc_s'])} µs/span ({r['gc_s'] / total:.0%} of wall)"
    )
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.cprofile)
        print("\n" + out.getvalue())


if __name__ == "__main__":
    main()
