"""Large and hostile-but-legal OTLP requests against a running sidecar: peak memory and liveness.

    .venv/bin/python bench/large_requests.py                 # every scenario, default settings
    .venv/bin/python bench/large_requests.py --scenario concurrent --requests 48

Starts `tracing-eval run --source otlp-http` (SQLite, evaluation held off so only the receiver works)
and, per scenario, polls `/healthz` every 50 ms from another thread while the requests run:

- `single`: one OTLP/protobuf request of `--spans` minimal spans (default: as many as fit in
  `max_body_bytes`, about 800,000 for 32 MiB);
- `members`: gzip of 1,000 zero bytes repeated as 32,000 members (906 KiB, 32 MB inflated; 413 with
  the default limit once inflated past it, but it must be inflated first);
- `concurrent`: `--requests` requests at once, each of minimal spans up to the largest body the
  receiver takes (`max_body_bytes` once inflated), gzip-compressed; refused ones are not resent;
- `concurrent-plain`: the same without compression (the bodies themselves fill the budget).

Reports, per scenario: the answers, the slowest `/healthz` answer, and the sidecar's peak RSS (VmHWM of
the process, which only grows: run one scenario per sidecar, as this script does). Figures go to
docs/reliability.md; JSON to bench/out/large_requests.json.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from bench.common import machine, table, write_json  # noqa: E402
from tests.support.otlp_payloads import minimal_spans  # noqa: E402
from tests.support.sidecar_process import clean_env, free_port  # noqa: E402
from tracing_eval.config import ReceiverSettings  # noqa: E402

PB = {"content-type": "application/x-protobuf"}


def spans_for(size: int) -> int:
    """How many minimal spans make a protobuf body of about `size` bytes."""
    probe = minimal_spans(1000)
    return int(size / len(probe) * 1000)


def rss_peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_now_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class HealthWatch(threading.Thread):
    """Polls /healthz every 50 ms; records the slowest answer (a failed poll counts as its timeout)."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base, self.slowest, self.polls, self.failures = base, 0.0, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    ok = client.get(f"{self.base}/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                took = time.monotonic() - started
                self.slowest, self.polls, self.failures = (
                    max(self.slowest, took),
                    self.polls + 1,
                    self.failures + (not ok),
                )
                self.stop.wait(0.05)


class Sidecar:
    def __init__(self, workdir: Path, env_extra: dict[str, str]) -> None:
        self.port = free_port()
        env = clean_env(
            workdir,
            {
                "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "3600",  # the receiver alone: nothing is evaluated
                "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": "36000",
                "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": "36000",
                **env_extra,
            },
        )
        self.log = (workdir / "sidecar.log").open("wb")
        cmd = [sys.executable, "-m", "tracing_eval", "run", "--source", "otlp-http", "--http", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{self.base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, "the sidecar did not start"
            time.sleep(0.1)
        self.idle_mib = rss_now_mib(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)
        self.log.close()


def post_all(base: str, bodies: list[tuple[bytes, dict[str, str]]]) -> tuple[list[int], float]:
    started = time.monotonic()

    def one(item: tuple[bytes, dict[str, str]]) -> int:
        body, headers = item
        try:
            return httpx.post(f"{base}/v1/traces", content=body, headers=headers, timeout=1800).status_code
        except httpx.HTTPError:
            return 0

    with ThreadPoolExecutor(len(bodies)) as pool:
        codes = list(pool.map(one, bodies))
    return codes, time.monotonic() - started


def scenario(name: str, args: argparse.Namespace, settings: ReceiverSettings) -> dict[str, Any]:
    if name == "single":
        n = args.spans or spans_for(settings.max_body_bytes - 64 * 1024)
        bodies = [(minimal_spans(n), PB)]
        what = f"1 request of {n:,} minimal spans ({len(bodies[0][0]) / 2**20:.1f} MiB protobuf)"
    elif name == "members":
        body = gzip.compress(b"\0" * 1000, mtime=0) * 32_000
        bodies = [(body, {**PB, "content-encoding": "gzip"})]
        what = f"1 gzip body of 32,000 members ({len(body) / 1024:.0f} KiB, 32 MB inflated)"
    else:
        n = spans_for(settings.max_body_bytes - 64 * 1024)
        plain = minimal_spans(n)
        if name == "concurrent":
            body = gzip.compress(plain, compresslevel=6, mtime=0)
            bodies = [(body, {**PB, "content-encoding": "gzip"})] * args.requests
            what = (
                f"{args.requests} requests at once, each {n:,} minimal spans: {len(plain) / 2**20:.1f} MiB "
                f"inflated, {len(body) / 2**20:.1f} MiB gzip"
            )
        else:
            bodies = [(plain, PB)] * args.requests
            what = f"{args.requests} requests at once, each {n:,} minimal spans: {len(plain) / 2**20:.1f} MiB plain"
    with tempfile.TemporaryDirectory(prefix="large-requests-") as tmp:
        car = Sidecar(Path(tmp), args.env)
        watch = HealthWatch(car.base)
        watch.start()
        try:
            codes, seconds = post_all(car.base, bodies)
        finally:
            watch.stop.set()
            watch.join()
            peak = rss_peak_mib(car.proc.pid)
            car.close()
    answers = {str(c): codes.count(c) for c in sorted(set(codes))}
    print(
        f"{name}: {what}: answers {answers} in {seconds:.1f} s; slowest /healthz {watch.slowest:.3f} s "
        f"({watch.polls} polls, {watch.failures} failed); RSS idle {car.idle_mib:.0f} MiB, peak {peak:.0f} MiB",
        flush=True,
    )
    return {
        "scenario": name,
        "what": what,
        "answers": answers,
        "seconds": round(seconds, 1),
        "healthz_slowest_seconds": round(watch.slowest, 3),
        "healthz_polls": watch.polls,
        "healthz_failures": watch.failures,
        "rss_idle_mib": round(car.idle_mib),
        "rss_peak_mib": round(peak),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=["single", "members", "concurrent", "concurrent-plain", "all"], default="all")
    ap.add_argument("--spans", type=int, default=0, help="spans in the `single` request (0: as many as fit)")
    ap.add_argument("--requests", type=int, default=48, help="requests sent at once in `concurrent`")
    ap.add_argument("--set", action="append", default=[], metavar="ENV=VALUE", help="extra sidecar environment")
    args = ap.parse_args()
    args.env = dict(item.split("=", 1) for item in args.set)
    settings = ReceiverSettings(
        **{k.removeprefix("TRACING_EVAL_RECEIVER__").lower(): v for k, v in args.env.items() if "RECEIVER__" in k}
    )
    names = ["single", "members", "concurrent", "concurrent-plain"] if args.scenario == "all" else [args.scenario]
    runs = [scenario(name, args, settings) for name in names]
    print(
        table(
            ["scenario", "answers", "seconds", "slowest /healthz (s)", "RSS idle (MiB)", "RSS peak (MiB)"],
            [
                [
                    r["what"],
                    r["answers"],
                    r["seconds"],
                    r["healthz_slowest_seconds"],
                    r["rss_idle_mib"],
                    r["rss_peak_mib"],
                ]
                for r in runs
            ],
        )
    )
    path = write_json(
        "large_requests.json", {"machine": machine(), "settings": args.env, "runs": runs, "load": os.getloadavg()}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
