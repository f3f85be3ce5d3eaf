"""A backlog of 1M spans: ingested with evaluation paused, then drained. Peak RSS throughout, on SQLite
and on PostgreSQL, and the end-to-end drain rate (load, assemble, metrics, record, outbox, delivery).

    .venv/bin/python bench/backlog.py                                        # 1M spans, SQLite then PostgreSQL
    .venv/bin/python bench/backlog.py --spans 60000 --backends sqlite        # a quick look

Per backend:

1. **Bodies.** The workload of `bench/workload.py` (10-turn conversations, half OpenInference, half OTel
   GenAI, chat spans carrying the whole history, a tool call every other turn: about 30 spans per
   conversation), built 1,000 conversations at a time and cached under `bench/out/backlog-bodies/`
   (gzip protobuf, 512 spans per request as BatchSpanProcessor sends them), so every backend and
   every run gets the same bytes.
2. **Ingest, evaluation paused.** `tracing-eval run --source otlp-http` pinned to core 0 (`taskset`)
   with a one-day tick, so nothing is claimed; one client on core 1 posts every body and needs a 200
   for each (a 429/503 is retried after its Retry-After). Then SIGTERM.
3. **Drain.** The same store, the sidecar started again on core 0 with a 1 s tick, `--sink otlp` to an
   OTLP/HTTP endpoint in this process (every result becomes an outbox row and an evaluation event;
   `--sink none`: the store only) and the deterministic metric pack. It claims batch after batch. Done when every conversation was
   evaluated as a whole thread, none is ready and the outbox is empty.

Memory: VmRSS of the sidecar every 0.5 s, and VmHWM when it stops, for both sidecar processes. CPU:
utime + stime of the sidecar. The drain rate is threads per wall second with the sidecar on one core,
and threads per CPU second. PostgreSQL is `PG_BENCH_URL` (as `bench/replicas.py`), a new database per
run; between ingest and drain the bench runs `ANALYZE` there, as autovacuum would after a bulk load
(the development machine's server runs with `autovacuum = off`, and without statistics the planner
scans whole tables for every batch). A server without autovacuum never cleans the outbox's dead rows,
and at 1M spans delivery then falls behind; to measure what a production server does, turn it on for
the run (`ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();`, and `ALTER SYSTEM RESET
autovacuum` after). Results go to `bench/out/backlog-<backend>-<sink>.json`.
"""

from __future__ import annotations

import argparse
import math
import pickle
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx  # noqa: E402
import replicas  # noqa: E402
import soak  # noqa: E402
from common import OUT, machine, table, write_json  # noqa: E402

from tracing_eval.config import DETERMINISTIC_PACK  # noqa: E402

CHUNK = 1000  # conversations per cached chunk
SPANS_PER_CONVERSATION = 30  # 10 turns, a tool call every other turn: 2 and 4 spans in turn
BODIES = OUT / "backlog-bodies"
SIDECAR_CORE, CLIENT_CORE = 0, 1


def chunks(conversations: int) -> list[Path]:
    """The cached chunks for `conversations` conversations, built where missing."""
    import workload

    BODIES.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, first in enumerate(range(0, conversations, CHUNK)):
        size = min(CHUNK, conversations - first)
        path = BODIES / f"chunk-{n:04d}-{size}.pickle"
        if not path.exists():
            started = time.perf_counter()
            wl = workload.build(size, 10, first=first, seed=1000 + n)
            path.write_bytes(pickle.dumps((wl.bodies, wl.body_spans)))
            soak.log(f"built chunk {n} ({wl.spans} spans) in {time.perf_counter() - started:.1f} s")
        paths.append(path)
    return paths


class RssSampler(threading.Thread):
    """VmRSS of a sidecar every `every` seconds until stopped; keeps the largest and the samples."""

    def __init__(self, car: soak.Sidecar, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.car, self.every = car, every
        self.peak_mb = 0.0
        self.samples: list[tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopped.wait(self.every):
            try:
                rss = self.car.status()["VmRSS"]
            except (OSError, KeyError):
                return
            self.peak_mb = max(self.peak_mb, rss)
            self.samples.append((round(time.monotonic() - start, 1), rss))

    def stop(self) -> dict[str, Any]:
        status = self.car.status()  # before the process exits
        self.stopped.set()
        self.join()
        return {"peak_rss_mb": max(self.peak_mb, status["VmHWM"]), "cpu_s": status["cpu_s"]}


def env_for(store_url: str, extra: dict[str, str]) -> dict[str, str]:
    args = argparse.Namespace(
        store_url=store_url, tick=86400.0, settle=0.0, idle=0.0, batch=100, log_level="warning", metrics="all"
    )
    env = soak.sidecar_env(args, Path("."), None, None)
    env["TRACING_EVAL_METRICS__ENABLED"] = "[" + ",".join(f'"{m}"' for m in DETERMINISTIC_PACK) + "]"
    env.update(extra)
    return env


def ingest(paths: list[Path], store_url: str, workdir: Path) -> dict[str, Any]:
    """Phase 2: every body posted to a sidecar whose evaluation is paused."""
    car = soak.Sidecar(env_for(store_url, {}), workdir, [], prefix=["taskset", "-c", str(SIDECAR_CORE)], name="ingest")
    sampler = RssSampler(car)
    sampler.start()
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    spans = requests = retried = 0
    cpu0 = car.status()["cpu_s"]
    started = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for n, path in enumerate(paths):
            bodies, counts = pickle.loads(path.read_bytes())
            for body, count in zip(bodies, counts, strict=True):
                while True:
                    r = client.post(f"{car.base}/v1/traces", content=body, headers=headers)
                    if r.status_code in (429, 503):
                        retried += 1
                        time.sleep(float(r.headers.get("retry-after", "1")))
                        continue
                    r.raise_for_status()
                    break
                spans += count
                requests += 1
            soak.log(f"ingest: chunk {n + 1}/{len(paths)}, {spans} spans, RSS peak {sampler.peak_mb:.0f} MiB")
    wall = time.perf_counter() - started
    metrics = car.metrics()
    store_bytes = scrape(car, "tracing_eval_store_bytes")
    out = sampler.stop()
    code = car.stop()
    return {
        **out,
        "cpu_s": out["cpu_s"] - cpu0,
        "spans": spans,
        "requests": requests,
        "retried": retried,
        "wall_s": wall,
        "spans_per_s": spans / wall,
        "spans_received": metrics["spans_received"],
        "store_bytes": store_bytes,
        "exit_code": code,
        "rss_samples": sampler.samples[:: max(1, len(sampler.samples) // 200)],
    }


def scrape(car: soak.Sidecar, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(car.http.get(f"{car.base}/metrics").text):
        for s in family.samples:
            if s.name == name:
                return s.value
    return float("nan")


def drain(conversations: int, store_url: str, workdir: Path, batch: int, sink: str) -> dict[str, Any]:
    """Phase 3: the same store, evaluation on; until every thread is evaluated and delivered."""
    collector = soak.Collector()
    extra = {
        "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "1",
        "TRACING_EVAL_SCHEDULE__BATCH_SIZE": str(batch),
        "TRACING_EVAL_SINKS__OTLP__ENDPOINT": collector.endpoint,
        "TRACING_EVAL_RETENTION__ENABLED": "false",
    }
    sinks = ["otlp"] if sink == "otlp" else []
    car = soak.Sidecar(
        env_for(store_url, extra), workdir, sinks, prefix=["taskset", "-c", str(SIDECAR_CORE)], name="drain"
    )
    sampler = RssSampler(car)
    sampler.start()
    cpu0 = car.status()["cpu_s"]
    started = time.perf_counter()
    progress: list[tuple[float, float]] = []
    evaluated_at = None
    while True:
        m = car.metrics()
        elapsed = time.perf_counter() - started
        progress.append((round(elapsed, 1), m["threads_evaluated"]))
        if evaluated_at is None and m["threads_evaluated"] >= conversations and m["threads_ready"] == 0:
            evaluated_at = (elapsed, car.status()["cpu_s"] - cpu0)
        if evaluated_at is not None and m["outbox_backlog"] == 0:
            break
        if not car.alive():
            raise RuntimeError(f"the sidecar stopped:\n{car.log_tail()}")
        if len(progress) % 15 == 0:
            soak.log(
                f"drain: {m['threads_evaluated']:.0f}/{conversations} threads, outbox {m['outbox_backlog']:.0f}, "
                f"RSS peak {sampler.peak_mb:.0f} MiB"
            )
        time.sleep(2)
    wall = time.perf_counter() - started
    out = sampler.stop()
    m = car.metrics()
    code = car.stop()
    collector.close()
    eval_wall, eval_cpu = evaluated_at
    return {
        **out,
        "cpu_s": out["cpu_s"] - cpu0,
        "threads": m["threads_evaluated"],
        "results": m["results"],
        "evaluation_errors": m["evaluation_errors"],
        "events_delivered": collector.counts["records"],
        "evaluated_wall_s": eval_wall,
        "evaluated_cpu_s": eval_cpu,
        "delivered_wall_s": wall,
        "threads_per_s": m["threads_evaluated"] / eval_wall,
        "threads_per_cpu_s": m["threads_evaluated"] / eval_cpu,
        "exit_code": code,
        "progress": progress,
        "rss_samples": sampler.samples[:: max(1, len(sampler.samples) // 200)],
    }


@contextmanager
def scratch_store(backend: str, name: str, keep: bool = False) -> Iterator[tuple[str, Path, str | None]]:
    """A new store of `backend` for one run: its URL, a temporary folder (the SQLite file is there) and
    the PostgreSQL database's name (None on SQLite); the database is dropped afterwards and the folder
    removed unless `keep`."""
    workdir = Path(tempfile.mkdtemp(prefix=f"tracing-eval-{name}-"))
    db_name = None
    if backend == "sqlite":
        store_url = f"sqlite+aiosqlite:///{workdir / 'store.db'}"
    else:
        db_name, store_url = replicas.new_database(f"bench_{name}")
    try:
        yield store_url, workdir, db_name
    finally:
        if db_name is not None:
            replicas.admin(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run_backend(
    backend: str, paths: list[Path], conversations: int, batch: int, sink: str, keep: bool
) -> dict[str, Any]:
    with scratch_store(backend, "backlog", keep) as (store_url, workdir, db_name):
        soak.log(f"{backend}: ingest with evaluation paused")
        first = ingest(paths, store_url, workdir)
        if backend == "sqlite":
            first["store_file_bytes"] = sum(p.stat().st_size for p in workdir.glob("store.db*"))
        if db_name is not None:  # what autovacuum does after a bulk load; this machine's server has it off
            replicas.admin_in(db_name, "ANALYZE")
        soak.log(f"{backend}: drain")
        second = drain(conversations, store_url, workdir, batch, sink)
        return {"backend": backend, "sink": sink, "ingest": first, "drain": second}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=1_000_000, help="at least this many spans (whole conversations)")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--batch", type=int, default=100, help="threads claimed per batch while draining")
    ap.add_argument(
        "--sink",
        choices=("otlp", "none"),
        default="otlp",
        help="otlp: results go through the outbox to an OTLP endpoint here; none: the store only",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders (stores, sidecar logs)")
    args = ap.parse_args()
    conversations = math.ceil(args.spans / SPANS_PER_CONVERSATION)
    paths = chunks(conversations)
    import os

    os.sched_setaffinity(0, {CLIENT_CORE})
    results = []
    for backend in (b.strip() for b in args.backends.split(",") if b.strip()):
        results.append(run_backend(backend, paths, conversations, args.batch, args.sink, args.keep))
        name = f"backlog-{backend}-{args.sink}.json"
        soak.log(f"wrote {write_json(name, {'machine': machine(), 'args': vars(args), **results[-1]})}")
    rows = []
    for r in results:
        i, d = r["ingest"], r["drain"]
        rows.append(
            [
                r["backend"],
                f"{i['spans']:,}",
                f"{i['spans_per_s']:,.0f}",
                f"{i['peak_rss_mb']:.0f}",
                f"{i['store_bytes'] / 2**30:.2f}",
                f"{d['threads']:,.0f}",
                f"{d['threads_per_s']:.1f}",
                f"{d['threads_per_cpu_s']:.1f}",
                f"{d['peak_rss_mb']:.0f}",
                f"{d['events_delivered']:,}",
            ]
        )
    print(
        table(
            [
                "store",
                "spans",
                "ingest spans/s",
                "ingest peak RSS MiB",
                "store GiB",
                "threads drained",
                "threads/s (1 core)",
                "threads/CPU s",
                "drain peak RSS MiB",
                "events delivered",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
