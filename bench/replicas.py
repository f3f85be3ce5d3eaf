"""Replicas on PostgreSQL: threads/s and judge calls/s with 1, 2 and 4 worker processes on one database.

    .venv/bin/python bench/replicas.py                       # 400 threads, L = 0.1 s, C = 4, replicas 1,2,4
    .venv/bin/python bench/replicas.py --threads 100 --replicas 1,4 --latency 0.05

For each replica count, in a new temporary PostgreSQL database: the threads are ingested once up front
(OTel GenAI spans built from `../shared/datasets/tau_airline_gpt4o.jsonl`, one trace per turn), then N
processes each run the real `Pipeline` (the product's store, metrics and judge client; owner
`replica-<i>`) with `tick(settle_all=True)` until a tick finds nothing left to claim. They all start at
one barrier; the wall time runs from the barrier to the last replica's end.

The judge is `bench/judge_server.py` in its own process: every call is answered after exactly L seconds
with a valid answer, and every replica has its own base URL there, so the judge counts each replica's
calls. Each replica caps its judge calls at C (`judge.max_concurrency`), so the ceiling is N * C / L
calls/s; the judge cache is off, so copies of a thread cost the same calls as the original.

Exactly-once check: every replica's store notes each claim it gets (thread, version, mode); across
replicas each (thread, version) must be claimed and evaluated once, with no lost lease and no error,
the judge must have answered the same number of calls as the single-replica run, and every thread's
stored results must be at its version.

PostgreSQL is `PG_BENCH_URL` (default `postgresql+asyncpg://postgres@127.0.0.1:5432/test`): each run
creates a database `bench_replicas_<hex>` there and drops it afterwards.

The tau-bench dataset has 200 threads; `--threads 400` takes each twice, the copy under another
conversation id and other trace ids. Output: a markdown table on stdout, progress on stderr, JSON with
the machine and every run in `bench/out/replicas.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, table, write_json  # noqa: E402

from tracing_eval.config import DETERMINISTIC_PACK  # noqa: E402

DATASET = REPO.parent / "shared" / "datasets" / "tau_airline_gpt4o.jsonl"
ADMIN_URL = os.environ.get("PG_BENCH_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
#: Deterministic pack plus three judged thread metrics: one batched judge call per thread (three with --unbatched).
METRICS = [*DETERMINISTIC_PACK, "completeness", "conversational_flow", "role_adherence"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the threads as OTel GenAI spans --------------------------------------------------------------


def _parts(m: Any) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": m.tool_call_id, "response": m.content}]}
    parts: list[dict[str, Any]] = [{"type": "text", "content": m.content}] if m.content else []
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return {"role": m.role, "parts": parts}


def thread_spans(thread: Any, copy: int, number: int) -> list[Any]:
    """One trace per turn, as an instrumented agent records it: an `invoke_agent` root with the
    conversation id, and one `chat` span per model call of the turn, whose input is the history so far
    (system prompt, earlier turns, this turn's user message, tool calls and results) and whose output
    is that call's assistant message."""
    from tracing_eval.model import Span

    conv = f"tau-{copy}-{thread.key}"
    history: list[dict[str, Any]] = []
    if thread.system_prompt:
        history.append({"role": "system", "parts": [{"type": "text", "content": thread.system_prompt}]})
    spans, t = [], 1_700_000_000_000_000_000 + number * 10**12
    for turn in thread.turns:
        trace_id = f"{copy:04x}{number:06x}{turn.index:022x}"
        root = f"{turn.index + 1:08x}00000000"
        t += 10**9
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=root,
                name="invoke_agent airline",
                start_ns=t,
                end_ns=t + 9 * 10**8,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conv},
            )
        )
        for i, m in enumerate(turn.messages):
            message = _parts(m)
            if m.role == "assistant":
                spans.append(
                    Span(
                        trace_id=trace_id,
                        span_id=f"{turn.index + 1:08x}{i + 1:08x}",
                        parent_id=root,
                        name="chat gpt-4o",
                        start_ns=t + i * 10**6,
                        end_ns=t + (i + 1) * 10**6,
                        attributes={
                            "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": "gpt-4o",
                            "gen_ai.conversation.id": conv,
                            "gen_ai.input.messages": json.dumps(history),
                            "gen_ai.output.messages": json.dumps([message]),
                        },
                    )
                )
            history = [*history, message]
    return spans


def build_spans(n_threads: int) -> list[list[Any]]:
    from tracing_eval.transcripts import thread_from_json_line

    lines = [x for x in DATASET.read_bytes().splitlines() if x.strip()]
    threads = [thread_from_json_line(line, i) for i, line in enumerate(lines, 1)]
    return [thread_spans(threads[i % len(threads)], i // len(threads), i) for i in range(n_threads)]


# -- databases and the judge -------------------------------------------------------------------------


def admin(sql: str) -> None:
    admin_in(None, sql)


def admin_in(database: str | None, sql: str) -> None:
    """Run one statement on PG_BENCH_URL's server, in `database` (default: PG_BENCH_URL's own)."""
    import asyncpg
    from sqlalchemy.engine import make_url

    async def run() -> None:
        url = make_url(ADMIN_URL)
        conn = await asyncpg.connect(
            host=url.host,
            port=url.port or 5432,
            user=url.username,
            password=url.password,
            database=database or url.database,
        )
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def new_database(prefix: str = "bench_replicas") -> tuple[str, str]:
    """A new empty database on PG_BENCH_URL's server: (name, SQLAlchemy URL)."""
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(drivername="postgresql+asyncpg", database=name)
    return name, url.render_as_string(hide_password=False)


class Judge:
    """bench/judge_server.py in its own process, with the project's Python."""

    def __init__(self, latency: float) -> None:
        cmd = [sys.executable, str(REPO / "bench" / "judge_server.py"), "--latency", str(latency)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().split()
        if len(first) < 2 or first[0] != "PORT":
            self.proc.kill()
            raise RuntimeError(f"judge server did not start (said {first!r})")
        self.port = int(first[1])
        deadline = time.monotonic() + 15
        while True:
            try:
                self.stats()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def base_url(self, client: str) -> str:
        return f"http://127.0.0.1:{self.port}/c/{client}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/reset", data=b"", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def postgres_cpu_seconds() -> float | None:
    """CPU of the local PostgreSQL so far: the postmaster's own and its reaped children's (backends
    that exited), plus the live backends'. None when no postmaster is visible in /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == "postgres":
                    procs[int(d.name)] = _stat(int(d.name))
            except OSError:
                continue
    masters = [pid for pid, f in procs.items() if int(f[1]) not in procs]
    if not masters:
        return None
    total = 0
    for pid, f in procs.items():
        total += int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if pid in masters else 0)
    return total / tick


# -- one replica (a spawned process) -------------------------------------------------------------------


def replica(url: str, owner: str, base_url: str, args: dict[str, Any], barrier: Any, out: Any) -> None:
    out.put(asyncio.run(_replica(url, owner, base_url, args, barrier)))


async def _replica(url: str, owner: str, base_url: str, args: dict[str, Any], barrier: Any) -> dict[str, Any]:
    from tracing_eval import logging as te_logging
    from tracing_eval.config import load_settings
    from tracing_eval.judge import JudgeClient
    from tracing_eval.metrics.catalogue import build_metrics
    from tracing_eval.pipeline import Pipeline
    from tracing_eval.store.sql import SqlStore

    te_logging.configure("warning")  # warnings and errors only (a lost lease would show here)
    claims: list[tuple[str, int, str]] = []

    class NotingStore(SqlStore):
        """The product's store, noting every claim this replica gets."""

        async def claim(self, *a: Any, **kw: Any) -> Any:
            got = await super().claim(*a, **kw)
            claims.extend((c.thread_key, c.version, c.mode.value) for c in got)
            return got

    settings = load_settings(
        None,
        store={"url": url},
        metrics={"enabled": METRICS},
        judge={
            "model": "gpt-4o-mini",
            "base_url": base_url,
            "api_key": "bench",
            "max_concurrency": args["concurrency"],
            "cache": False,
            "batch_thread_metrics": not args["unbatched"],
        },
        schedule={"batch_size": args["batch"]},
    )
    store = NotingStore(url)
    await store.open()
    judge = JudgeClient.from_settings(settings.judge, None)
    assert judge is not None, "the judge tier did not switch on"
    pipeline = Pipeline(store, settings, build_metrics(settings), owner=owner, judge=judge)
    totals: Counter[str] = Counter()
    await asyncio.to_thread(barrier.wait)
    started, cpu = time.time(), time.process_time()
    ticks = 0
    try:
        while True:
            stats = await pipeline.tick(settle_all=True)
            ticks += 1
            for name in ("threads_evaluated", "turn_evaluations", "results", "errors", "lost_leases"):
                totals[name] += getattr(stats, name)
            if not stats.threads_evaluated and not stats.turn_evaluations:
                break
        ended = time.time()
        return {
            "owner": owner,
            "started": started,
            "ended": ended,
            "cpu_seconds": time.process_time() - cpu,
            "ticks": ticks,
            "judge_calls": judge.usage.calls,
            "claims": claims,
            **totals,
        }
    finally:
        await pipeline.close()
        await store.close()


# -- one run -------------------------------------------------------------------------------------------


async def ingest(url: str, threads: list[list[Any]]) -> float:
    from tracing_eval.ingest import make_batch
    from tracing_eval.store.sql import SqlStore

    store = SqlStore(url)
    await store.open()
    started = time.perf_counter()
    try:
        for i in range(0, len(threads), 20):
            spans = [s for t in threads[i : i + 20] for s in t]
            await store.ingest(make_batch(spans, []), time.time())
        return time.perf_counter() - started
    finally:
        await store.close()


async def check(url: str, n_threads: int) -> dict[str, Any]:
    from tracing_eval.store.sql import SqlStore

    store = SqlStore(url)
    await store.open()
    try:
        states = await store.thread_states()
        results = await store.results()
    finally:
        await store.close()
    versions = {s["key"]: s["version"] for s in states}
    return {
        "threads": len(states),
        "all_evaluated": all(s["evaluated_version"] == s["version"] and s["lease_owner"] is None for s in states),
        "results": len(results),
        "results_at_thread_version": all(r.thread_version == versions[r.thread_key] for r in results),
        "threads_with_results": len({r.thread_key for r in results}),
        "expected_threads": n_threads,
    }


def run(n: int, threads: list[list[Any]], judge: Judge, args: argparse.Namespace) -> dict[str, Any]:
    name, url = new_database()
    try:
        ingest_s = asyncio.run(ingest(url, threads))
        log(f"{n} replica(s): ingested {len(threads)} threads in {ingest_s:.1f}s; evaluating")
        judge.reset()
        ctx = mp.get_context("spawn")
        barrier, out = ctx.Barrier(n + 1), ctx.Queue()
        params = {"concurrency": args.concurrency, "batch": args.batch, "unbatched": args.unbatched}
        procs = [
            ctx.Process(
                target=replica, args=(url, f"replica-{i}", judge.base_url(f"replica-{i}"), params, barrier, out)
            )
            for i in range(n)
        ]
        for p in procs:
            p.start()
        barrier.wait(120)
        released, judge_cpu, pg_cpu = time.time(), judge.cpu_seconds(), postgres_cpu_seconds()
        reports = [out.get(timeout=900) for _ in procs]
        for p in procs:
            p.join(60)
        wall = max(r["ended"] for r in reports) - released
        judge_cpu = judge.cpu_seconds() - judge_cpu
        time.sleep(0.5)  # the replicas' backends exit once their connections close
        pg_after = postgres_cpu_seconds()
        pg_cpu = pg_after - pg_cpu if pg_after is not None and pg_cpu is not None else None
        served = judge.stats()
        verdict = asyncio.run(check(url, len(threads)))
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    claims = Counter((k, v) for r in reports for k, v, _ in r["claims"])
    calls = sum(c["calls"] for c in served["clients"].values())
    result = {
        "replicas": n,
        "threads": len(threads),
        "wall_seconds": wall,
        "threads_per_s": len(threads) / wall,
        "judge_calls": calls,
        "judge_calls_per_s": calls / wall,
        "ceiling_calls_per_s": n * args.concurrency / args.latency,
        "judge_errors": sum(c["errors"] for c in served["clients"].values()),
        "max_in_flight": {k: c["max_in_flight"] for k, c in sorted(served["clients"].items())},
        "per_replica": [
            {
                "owner": r["owner"],
                "threads": r["threads_evaluated"],
                "judge_calls": r["judge_calls"],
                "cpu_seconds": round(r["cpu_seconds"], 2),
                "ticks": r["ticks"],
                "busy_seconds": round(r["ended"] - r["started"], 2),
            }
            for r in reports
        ],
        "replicas_cpu_seconds": sum(r["cpu_seconds"] for r in reports),
        "judge_cpu_seconds": judge_cpu,
        "postgres_cpu_seconds": pg_cpu,
        "ingest_seconds": ingest_s,
        "claims": sum(claims.values()),
        "claimed_twice": sorted(k for k, c in claims.items() if c > 1),
        "threads_evaluated": sum(r["threads_evaluated"] for r in reports),
        "errors": sum(r["errors"] for r in reports),
        "lost_leases": sum(r["lost_leases"] for r in reports),
        "check": verdict,
    }
    result["exactly_once"] = (
        result["claims"] == len(threads)
        and not result["claimed_twice"]
        and result["threads_evaluated"] == len(threads)
        and result["errors"] == result["lost_leases"] == result["judge_errors"] == 0
        and verdict["threads"] == verdict["threads_with_results"] == len(threads)
        and verdict["all_evaluated"]
        and verdict["results_at_thread_version"]
    )
    log(
        f"{n} replica(s): {wall:.1f}s, {result['threads_per_s']:.1f} threads/s, {result['judge_calls_per_s']:.1f} "
        f"judge calls/s ({calls} calls), exactly once: {result['exactly_once']}"
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=400)
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--latency", type=float, default=0.1, help="seconds the judge takes for every call (L)")
    ap.add_argument("--concurrency", type=int, default=4, help="judge calls in flight per replica (C)")
    ap.add_argument("--batch", type=int, default=8, help="threads claimed per claim (schedule.batch_size)")
    ap.add_argument(
        "--unbatched",
        action="store_true",
        help="judge.batch_thread_metrics off: one call per judged metric (3 per thread, as measured before batching)",
    )
    ap.add_argument("--json", default="replicas.json")
    args = ap.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]

    log(f"building {args.threads} threads from {DATASET.name}")
    threads = build_spans(args.threads)
    judge = Judge(args.latency)
    try:
        runs = [run(n, threads, judge, args) for n in counts]
    finally:
        judge.close()
    base = runs[0]
    same_calls = all(r["judge_calls"] == base["judge_calls"] for r in runs)
    rows = [
        [
            r["replicas"],
            r["threads"],
            f"{r['wall_seconds']:.1f}",
            f"{r['threads_per_s']:.1f}",
            f"{r['threads_per_s'] / base['threads_per_s'] * base['replicas']:.2f}×",
            f"{r['judge_calls']:,}",
            f"{r['judge_calls_per_s']:.0f}",
            f"{r['judge_calls_per_s'] / r['ceiling_calls_per_s']:.2f}",
            " / ".join(str(p["threads"]) for p in r["per_replica"]),
            f"{r['replicas_cpu_seconds']:.1f} / {r['judge_cpu_seconds']:.1f} / "
            + (f"{r['postgres_cpu_seconds']:.1f}" if r["postgres_cpu_seconds"] is not None else "?"),
            "yes" if r["exactly_once"] else "**NO**",
        ]
        for r in runs
    ]
    headers = [
        "replicas",
        "threads",
        "wall s",
        "threads/s",
        "× 1 replica",
        "judge calls",
        "calls/s",
        "× N·C/L",
        "threads per replica",
        "CPU s: replicas / judge / PostgreSQL",
        "each thread version once",
    ]
    print(table(headers, rows))
    print(f"\nsame judge calls in every run: {'yes' if same_calls else 'NO'}")
    path = write_json(
        args.json,
        {
            "machine": machine(),
            "params": {**vars(args), "metrics": METRICS, "dataset": DATASET.name},
            "runs": runs,
            "same_judge_calls": same_calls,
        },
    )
    log(f"wrote {path}")
    if not (same_calls and all(r["exactly_once"] for r in runs)):
        sys.exit(1)


if __name__ == "__main__":
    main()
