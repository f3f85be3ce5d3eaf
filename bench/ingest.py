"""OTLP ingest throughput on one core, with payloads from the real OTel SDK and exporter encoding.

Modes, all over the same gzip protobuf request bodies (see `workload.py`):

- `decode`: gunzip + protobuf parse + every attribute read into canonical spans (the ceiling);
- `full`: decode + normalise (`make_batch`) + durable persist (`SqlStore.ingest`, fresh SQLite file,
  WAL + synchronous=FULL), one transaction per request as the receiver does it;
- `http`: `tracing-eval run --source otlp-http` as a subprocess pinned to core 0, fed by an HTTP client
  pinned to core 1; every span is counted in the store afterwards.
- `phoenix`: Arize Phoenix (`phoenix serve`, in its own venv under `bench/out/venvs/phoenix`, created
  with pip on first use) pinned to core 0, fed the first `--phoenix-requests` of the same bodies by the
  same client on core 1; the rate is spans persisted (counted in Phoenix's SQLite file) per second from
  the first request until the last span is in. Phoenix answers 200 before it persists (a queue
  in memory); tracing-eval answers 200 only after its commit.

After the `full` runs the stored spans are read back (`SqlStore.load_traces`) and compared with what
was decoded: the same spans, ids, times and attributes (a JSON string attribute may come back with
other spacing), so the rate is for storing all of it.

`decode` and `full` run in a fresh child process pinned to core 0 (`os.sched_setaffinity`), so each
reports its own peak RSS; both set up the garbage collector as `tracing-eval run` does (`tune_gc`). Throughput is the median over `--repeat` runs.

    .venv/bin/python bench/ingest.py                       # 1000 conversations x 10 turns
    .venv/bin/python bench/ingest.py --conversations 200 --modes decode,full --repeat 1   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, machine, peak_rss_mb, pin, table, write_json  # noqa: E402

from tracing_eval.config import MAX_BODY_BYTES  # noqa: E402

LIMIT = MAX_BODY_BYTES  # the receiver's default max_body_bytes
CORE = 0


# -- measured work (child process) ----------------------------------------------------------------


def _decode_only(bodies: list[bytes], warmup: int) -> dict[str, Any]:
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress

    for body in bodies[:warmup]:  # imports, first-call costs, a grown heap as in a long-running receiver
        decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF)
    spans = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        spans += len(decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF).spans)
    return {"spans": spans, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


async def _full_path(bodies: list[bytes], db: Path, warmup: int) -> dict[str, Any]:
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress
    from tracing_eval.ingest import make_batch
    from tracing_eval.store.sql import SqlStore

    if warmup:  # the same path into a throwaway database: statement caches, a grown heap
        scratch = SqlStore(f"sqlite+aiosqlite:///{db.with_suffix('.warmup.db')}")
        await scratch.open()
        for body in bodies[:warmup]:
            await scratch.ingest(
                make_batch(decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF).spans, []), time.time()
            )
        await scratch.close()
    store = SqlStore(f"sqlite+aiosqlite:///{db}")
    await store.open()
    stages = {"decode": 0.0, "normalise": 0.0, "persist": 0.0}
    spans = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        t0 = time.perf_counter()
        decoded = decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF)
        t1 = time.perf_counter()
        batch = make_batch(decoded.spans, [], source="otlp")
        t2 = time.perf_counter()
        await store.ingest(batch, time.time())
        t3 = time.perf_counter()
        stages["decode"] += t1 - t0
        stages["normalise"] += t2 - t1
        stages["persist"] += t3 - t2
        spans += len(decoded.spans)
    result = {
        "spans": spans,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "stages_s": stages,
    }
    result["peak_rss_mb"] = peak_rss_mb()  # before reading back, which holds every decoded span
    result["read_back"] = await _read_back(store, bodies)
    await store.close()
    result["stored"] = _count(db)
    return result


async def _read_back(store: Any, bodies: list[bytes]) -> dict[str, int]:
    """Compare every stored span with what was decoded: how many came back equal, and differ."""
    from tracing_eval.connectors.otlp.decode import PROTOBUF, decode_traces, decompress

    sent = {
        (s.trace_id, s.span_id): s
        for body in bodies
        for s in decode_traces(decompress(body, "gzip", LIMIT), PROTOBUF).spans
    }
    equal = differ = 0
    for key in await store.thread_keys():
        for trace in await store.load_traces(key):
            for span in trace:
                if _same_span(sent.pop((span.trace_id, span.span_id)), span):
                    equal += 1
                else:
                    differ += 1
    return {"equal": equal, "differ": differ, "missing": len(sent)}


def _same_span(a: Any, b: Any) -> bool:
    def same(x: Any, y: Any) -> bool:
        if isinstance(x, str) and isinstance(y, str) and x != y:
            try:
                return json.loads(x) == json.loads(y)
            except ValueError:
                return False
        return x == y

    fields = ("trace_id", "span_id", "parent_id", "name", "kind", "start_ns", "end_ns", "status", "resource", "scope")
    return (
        all(getattr(a, f) == getattr(b, f) for f in fields)
        and a.attributes.keys() == b.attributes.keys()
        and all(same(v, b.attributes[k]) for k, v in a.attributes.items())
        and [e.model_dump() for e in a.events] == [e.model_dump() for e in b.events]
    )


def _count(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {
            "spans": conn.execute("SELECT count(*) FROM spans").fetchone()[0],
            "traces": conn.execute("SELECT count(*) FROM traces").fetchone()[0],
            "threads": conn.execute("SELECT count(*) FROM threads").fetchone()[0],
        }


def worker(mode: str, payloads: Path, workdir: Path, warmup: int) -> None:
    """Child-process entry: pin, load the bodies, measure one mode, print JSON on stdout."""
    pin(CORE)
    bodies: list[bytes] = pickle.loads(payloads.read_bytes())
    rss_loaded = peak_rss_mb()
    from tracing_eval.worker import tune_gc

    tune_gc()  # the garbage collector as `tracing-eval run` sets it, in both modes
    if mode == "decode":
        result = _decode_only(bodies, warmup)
    else:
        result = asyncio.run(_full_path(bodies, workdir / f"full-{os.getpid()}.db", warmup))
    result["rss_loaded_mb"] = rss_loaded
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print(json.dumps(result))


def run_child(mode: str, payloads: Path, workdir: Path, warmup: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        mode,
        "--payloads",
        str(payloads),
        "--workdir",
        str(workdir),
        "--warmup",
        str(warmup),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- end to end over HTTP -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, all threads


def _proc_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_healthy(server: subprocess.Popen[bytes], base: str, seconds: float, output: Any) -> None:
    """Until `base/healthz` answers 200; raises with the server's last output if it exits or takes too long."""
    import httpx

    deadline = time.monotonic() + seconds
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {output()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not become healthy in {seconds:g} s")
        time.sleep(0.2)


def http_run(
    bodies: list[bytes],
    body_spans: list[int],
    workdir: Path,
    clients: int,
    warmup: int,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start the sidecar on core 0, push every body from core 1, then count what the store holds.

    The first `warmup` bodies are sent once before timing; they are sent again in the timed run and
    overwrite themselves (same span ids), so the store must end with exactly one row per span.
    """
    import httpx

    db = workdir / f"http-{time.monotonic_ns()}.db"
    port = _free_port()
    env = {
        **os.environ,
        "TRACING_EVAL_STORE__URL": f"sqlite+aiosqlite:///{db}",
        "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "86400",
        "TRACING_EVAL_LOGGING__LEVEL": "warning",
        **(extra_env or {}),
    }
    exe = str(Path(sys.executable).with_name("tracing-eval"))
    server = subprocess.Popen(
        ["taskset", "-c", str(CORE), exe, "run", "--source", "otlp-http", "--http", f"127.0.0.1:{port}"],
        env=env,
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(server, base, 60, lambda: server.stderr.read().decode()[-2000:] if server.stderr else "")
        os.sched_setaffinity(0, {1 - CORE})  # the client runs on the other core
        headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
        accepted = [0] * clients
        statuses: dict[int, int] = {}
        lock = threading.Lock()

        def push(lane: int) -> None:
            with httpx.Client(timeout=120) as client:
                for i in range(lane, len(bodies), clients):
                    r = client.post(f"{base}/v1/traces", content=bodies[i], headers=headers)
                    with lock:
                        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    if r.status_code == 200:
                        accepted[lane] += body_spans[i]

        with httpx.Client(timeout=120) as client:
            for body in bodies[:warmup]:
                client.post(f"{base}/v1/traces", content=body, headers=headers).raise_for_status()
        cpu0 = _proc_cpu_s(server.pid)
        wall = time.perf_counter()
        lanes = [threading.Thread(target=push, args=(i,)) for i in range(clients)]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()
        wall = time.perf_counter() - wall
        cpu = _proc_cpu_s(server.pid) - cpu0
        hwm = _proc_hwm_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {
        "spans": sum(accepted),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": hwm,
        "statuses": statuses,
        "clients": clients,
        "stored": _count(db),
    }


# -- Arize Phoenix on the same bodies -----------------------------------------------------------

PHOENIX = ("arize-phoenix==20.26.1",)


def phoenix_run(bodies: list[bytes], body_spans: list[int], workdir: Path, install: bool) -> dict[str, Any]:
    """Phoenix in its own venv on core 0, fed from core 1; spans/s until every span is in its SQLite file."""
    import httpx
    import judge  # the peers' venvs live with the judge bench's

    python = judge.ensure_venv(judge.Venv("phoenix", PHOENIX), install)
    home = workdir / f"phoenix-{time.monotonic_ns()}"
    home.mkdir()
    port, grpc_port = _free_port(), _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))},
        "PHOENIX_WORKING_DIR": str(home),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log_file = (home / "phoenix.log").open("wb")
    server = subprocess.Popen(
        ["taskset", "-c", str(CORE), str(python.with_name("phoenix")), "serve"],
        env=env,
        cwd=home,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    db = home / "phoenix.db"
    try:
        wait_healthy(server, base, 180, lambda: (home / "phoenix.log").read_text()[-2000:])
        os.sched_setaffinity(0, {1 - CORE})
        headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
        sent = sum(body_spans)
        cpu0 = _proc_cpu_s(server.pid)
        wall = time.perf_counter()
        statuses: dict[int, int] = {}
        with httpx.Client(timeout=300) as client:
            for body in bodies:
                r = client.post(f"{base}/v1/traces", content=body, headers=headers)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        acknowledged = time.perf_counter() - wall
        stored = 0
        while stored < sent and time.perf_counter() - wall < 3600:
            time.sleep(0.2)
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
                stored = conn.execute("SELECT count(*) FROM spans").fetchone()[0]
        wall = time.perf_counter() - wall
        cpu = _proc_cpu_s(server.pid) - cpu0
        hwm = _proc_hwm_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log_file.close()
    return {
        "spans": stored,
        "wall_s": wall,
        "acknowledged_s": acknowledged,
        "cpu_s": cpu,
        "peak_rss_mb": hwm,
        "statuses": statuses,
        "stored": {"spans": stored},
        "version": judge.pip_version(python, "arize-phoenix"),
    }


# -- driver ---------------------------------------------------------------------------------------


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ranked = sorted(runs, key=lambda r: r["spans"] / r["wall_s"])
    best = dict(ranked[len(ranked) // 2])
    best["runs_spans_per_s"] = [round(r["spans"] / r["wall_s"]) for r in runs]
    if "stored" in best:  # every run, not only the median one, must have stored every span once
        best["runs_stored_spans"] = [r["stored"]["spans"] for r in runs]
    if "read_back" in best:
        best["runs_read_back"] = [r["read_back"] for r in runs]
    if "statuses" in best:
        best["runs_statuses"] = [r["statuses"] for r in runs]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=512, help="spans per export request (BatchSpanProcessor default)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode; the median is reported")
    ap.add_argument(
        "--warmup", type=int, default=5, help="requests processed (into a throwaway database) before timing"
    )
    ap.add_argument("--modes", default="decode,full,http,phoenix", help="comma-separated: decode, full, http, phoenix")
    ap.add_argument(
        "--phoenix-requests", type=int, default=20, help="how many of the bodies (from the first) Phoenix gets"
    )
    ap.add_argument("--no-install", action="store_true", help="fail instead of creating Phoenix's venv")
    ap.add_argument(
        "--http-clients", default="1,4", help="comma-separated numbers of concurrent exporters for the http mode"
    )
    ap.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the http-mode server, e.g. TRACING_EVAL_RECEIVER__MAX_CONCURRENT_WRITES=1",
    )
    ap.add_argument("--styles", default=",".join(("openinference", "genai")), help="span conventions in the workload")
    ap.add_argument("--json", default="ingest.json", help="file name under bench/out/ ('' for none)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--payloads", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.payloads, args.workdir, args.warmup)
        return

    import workload

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    server_env = dict(kv.split("=", 1) for kv in args.server_env)
    started = time.perf_counter()
    styles = tuple(x.strip() for x in args.styles.split(",") if x.strip())
    wl = workload.build(args.conversations, args.turns, styles=styles, batch_size=args.batch_size)
    print(
        f"workload: {args.conversations} conversations x {args.turns} turns = {wl.spans} spans in {len(wl.bodies)} "
        f"requests; mean span {wl.span_bytes / wl.spans / 1024:.2f} KiB protobuf; {wl.raw_bytes / 1e6:.1f} MB raw, "
        f"{sum(map(len, wl.bodies)) / 1e6:.1f} MB gzip (built in {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )

    results: dict[str, dict[str, Any]] = {}
    # /tmp is on the same disk as the repo here; the SQLite files must be on a real disk for fsync to count.
    with tempfile.TemporaryDirectory(prefix="tracing-eval-bench-") as tmp:
        workdir = Path(tmp)
        payloads = workdir / "bodies.pickle"
        payloads.write_bytes(pickle.dumps(wl.bodies))
        for mode in ("decode", "full"):
            if mode in modes:
                results[mode] = _median_run(
                    [run_child(mode, payloads, workdir, args.warmup) for _ in range(args.repeat)]
                )
                print(f"{mode}: {results[mode]['runs_spans_per_s']} spans/s", file=sys.stderr)
        if "http" in modes:
            for clients in (int(x) for x in args.http_clients.split(",")):
                key = f"http-{clients}"
                results[key] = _median_run(
                    [
                        http_run(wl.bodies, wl.body_spans, workdir, clients, args.warmup, server_env)
                        for _ in range(args.repeat)
                    ]
                )
                print(
                    f"{key}: {results[key]['runs_spans_per_s']} spans/s, HTTP statuses per run {results[key]['runs_statuses']}",
                    file=sys.stderr,
                )
        if "phoenix" in modes:
            n = args.phoenix_requests
            results["phoenix"] = _median_run(
                [
                    phoenix_run(wl.bodies[:n], wl.body_spans[:n], workdir, not args.no_install)
                    for _ in range(args.repeat)
                ]
            )
            print(f"phoenix: {results['phoenix']['runs_spans_per_s']} spans/s", file=sys.stderr)

    base = results.get("decode", {}).get("spans", 0) / results["decode"]["wall_s"] if "decode" in results else None
    base_cpu = results["decode"]["cpu_s"] / results["decode"]["spans"] if "decode" in results else None
    labels = {
        "decode": "decode only (gunzip + parse + attributes)",
        "full": "full ingest (decode + normalise + SQLite persist)",
        "phoenix": "Arize Phoenix over HTTP, same bodies (server CPU)",
    }
    rows = []
    for mode, r in results.items():
        expected = sum(wl.body_spans[: args.phoenix_requests]) if mode == "phoenix" else wl.spans
        bad = [n for n in r.get("runs_stored_spans", []) if n != expected]
        if bad:
            print(f"WARNING: {mode}: a run stored {bad} spans, expected {expected}", file=sys.stderr)
        if mode.startswith("http-"):
            n = int(mode.split("-")[1])
            labels[mode] = f"end to end over HTTP, {n} client{'s' if n > 1 else ''} (server CPU)"
        rate = r["spans"] / r["wall_s"]
        runs_stored = r.get("runs_stored_spans", [])
        stored = (
            "-"
            if not runs_stored
            else f"{expected}/{expected} in {len(runs_stored) - len(bad)}/{len(runs_stored)} runs"
        )
        rows.append(
            [
                labels[mode],
                f"{rate:,.0f}",
                f"{r['cpu_s'] * 1000 / r['spans']:.3f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{rate / base:.2f}" if base else "-",
                f"{base_cpu / (r['cpu_s'] / r['spans']):.2f}" if base_cpu else "-",
                stored,
            ]
        )
    print(
        table(
            ["path (1 core)", "spans/s", "CPU ms/span", "peak RSS MB", "x decode", "x decode (CPU)", "spans stored"],
            rows,
        )
    )
    if "phoenix" in results:
        phoenix = results["phoenix"]["spans"] / results["phoenix"]["wall_s"]
        for mode in ("full", "http-1"):
            if mode in results:
                rate = results[mode]["spans"] / results[mode]["wall_s"]
                print(f"\n{labels[mode]}: {rate / phoenix:,.0f} x Arize Phoenix's rate in this run")
    if "full" in results:
        print(f"\nstored content read back after each full run: {results['full']['runs_read_back']}")
        st = results["full"]["stages_s"]
        total = sum(st.values())
        print("\nfull path wall time by stage: " + ", ".join(f"{k} {v / total:.0%}" for k, v in st.items()))
    if args.json:
        path = write_json(
            args.json,
            {
                "machine": machine(),
                "args": {k: v for k, v in vars(args).items() if v is not None and k != "payloads"},
                "workload": {
                    "spans": wl.spans,
                    "requests": len(wl.bodies),
                    "mean_span_bytes": wl.span_bytes / wl.spans,
                    "raw_bytes": wl.raw_bytes,
                    "gzip_bytes": sum(map(len, wl.bodies)),
                },
                "results": results,
            },
        )
        print(f"\n(wrote {path})", file=sys.stderr)


if __name__ == "__main__":
    main()
