"""Memory soak: the sidecar's RSS under a fixed span rate for a long run (issue 6: no growth beyond noise).

    .venv/bin/python bench/soak.py                          # 100 spans/s for 30 minutes, judge and OTLP sink on
    .venv/bin/python bench/soak.py --seconds 120            # a quick look
    .venv/bin/python bench/soak.py --no-judge               # deterministic metrics only
    .venv/bin/python bench/soak.py --store-url postgresql+asyncpg://postgres@127.0.0.1:5432/soak

What runs: the real `tracing-eval run --source otlp-http --sink otlp` as a subprocess, with a SQLite
store in a temporary folder (or `--store-url`), a 1 s tick, 2 s turn settle, 5 s thread idle and 200
threads claimed per tick, so turns and threads are evaluated all along. The judge tier points at
`bench/judge_server.py` (every call answered after 0.05 s; `--no-judge` turns it off); the metrics are
the deterministic pack plus completeness, conversational_flow and role_adherence (`--metrics all`: the
product's whole list, which does not keep up with 100 spans/s on a 2-core machine). The OTLP sink
sends to a small OTLP/HTTP logs endpoint in this process that answers 200 and counts the events.

The feed: the real OpenTelemetry SDK (BatchSpanProcessor with a 1 s schedule delay, the OTLP/HTTP
protobuf exporter with gzip) sends GenAI conversations at a fixed span rate (`--rate`, 100 spans/s)
for `--seconds` (1800). A turn is an `invoke_agent` root span with `gen_ai.conversation.id` and a
`chat` child with `gen_ai.input.messages` / `gen_ai.output.messages`; in every fourth conversation
the second turn also has a failed `execute_tool` span, and every third ends with a re-ask (both make
review items). Conversations have `--turns` (6-9) turns of unique text. About `--turn-gap` x rate / 2
of them are open at once and get turns in rotation, so each gets a turn every `--turn-gap` s (3 s:
between settle and idle, so turns are evaluated as they settle and threads once idle); a finished
one is replaced by a new one, so new threads arrive throughout and the store grows on disk. The loop
sleeps until the next span is due (start + spans sent / rate).

Every `--sample-seconds` (10) a sampler thread reads the sidecar's VmRSS, RssAnon, VmHWM and CPU time
from /proc/PID, the spans sent, and `/metrics` (spans received, threads evaluated, threads ready,
outbox backlog, judge calls, sink deliveries). After the feed it waits (at most `--drain-seconds`)
until every conversation was evaluated and the outbox is empty, then stops the sidecar with SIGTERM.

Verdict rule. The first `--warmup` (20 %) of the feed is warm-up. Over the feed's later samples a
least-squares line of RSS against time gives the slope (reported in MiB per 10 min) and the rise over
that window, rise = slope x (last sample time - end of warm-up). Noise is the spread (max - min) of
the samples around that line. "no growth beyond noise" when rise < noise, else "RSS grew". The raw
spread (max - min of the samples) is reported too but is not the yardstick: a steady climb puts its
own rise into the raw spread, so rise < raw spread would pass nearly any leak. The same rule over
"finished conversations not yet evaluated" and the outbox backlog says whether the sidecar kept up
(a soak that did not keep up is not a steady state; the output says so). Spans sent must equal spans
received. Exit status 1 when RSS grew, spans went missing or the sidecar did not exit 0.

Output: a markdown table of the samples (one a minute, `--table-every`) and the summary on stdout,
progress on stderr, `bench/out/soak.json` with the machine, the parameters, every sample and the
summary. The temporary folder (store, sidecar log) is removed at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import replicas  # noqa: E402
from common import REPO, machine, table, write_json  # noqa: E402
from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.trace import Status, StatusCode  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from replicas import Judge  # noqa: E402

EXE = REPO / ".venv" / "bin" / "tracing-eval"
MIB = 1024 * 1024
#: Variables of the caller's shell that would change what the sidecar does.
FOREIGN = ("TRACING_EVAL_", "OPENAI_", "LANGFUSE_", "OTEL_")
SYSTEM = "You are the support assistant of an online shop. Be brief and precise."
#: The deterministic pack and three judged thread metrics (as bench/replicas.py): one batched judge call a
#: thread (three with --unbatched). The whole list (`--metrics all`) did not keep up with 100 spans/s on 2 cores.
METRICS = ",".join(replicas.METRICS)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the conversations ----------------------------------------------------------------------------


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def exchange(n: int, i: int, last: bool) -> tuple[str, str]:
    """Turn `i` of conversation `n`: what the user says and what the assistant answers (unique per
    conversation, so judge answers are never served from the cache). The last turn closes the
    conversation; every third conversation's last answer asks for the order number the user gave in
    the first turn (a re-ask: a review item)."""
    order, day, street = f"A{n:07d}", DAYS[n % len(DAYS)], f"{n % 97 + 1} Elm Street"
    if last:
        answer = "Could you please provide your order number?" if n % 3 == 0 else "You are welcome. Goodbye!"
        return f"Thanks, that is all for {order}.", answer
    script = [
        (f"Hi, where is my order {order}?", f"Order {order} left our warehouse yesterday and is with the courier."),
        (
            f"It was supposed to arrive on {day}. Can you check with the courier?",
            f"The courier confirms delivery of {order} for {DAYS[(n + 1) % len(DAYS)]} morning.",
        ),
        (
            f"Can you send it to {street} instead?",
            f"Done: {order} goes to {street}; a new tracking mail is on its way.",
        ),
        ("What is the refund policy if it arrives damaged?", "Send a photo within 14 days and we refund it in full."),
        ("Can I add a gift note?", "Yes, the gift note will be printed on the packing slip."),
        ("Is the parcel insured?", f"Yes, {order} is insured up to its full value."),
        ("Can someone sign for it if I am out?", "Yes, any adult at the address can sign for it."),
        ("Will I get a text before it arrives?", "Yes, the courier texts you an hour before delivery."),
    ]
    user, answer = script[i % len(script)]
    return (user, answer) if i < len(script) else (f"{user} (asking again, turn {i + 1})", answer)


@dataclass
class Conversation:
    number: int
    conv_id: str
    turns: int
    done: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


class CountingExporter(SpanExporter):
    """The OTLP/HTTP exporter, counting the spans the receiver acknowledged."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Feed:
    """An instrumented app: GenAI conversation turns through the real SDK and OTLP exporter."""

    def __init__(self, endpoint: str, open_conversations: int, turns: tuple[int, int], run_id: str) -> None:
        self.exporter = CountingExporter(OTLPSpanExporter(endpoint=endpoint, compression=Compression.Gzip))
        self.provider = TracerProvider(resource=Resource.create({"service.name": "soak-shop-bot"}))
        self.provider.add_span_processor(
            BatchSpanProcessor(self.exporter, schedule_delay_millis=1000, max_export_batch_size=512)
        )
        self.tracer = self.provider.get_tracer("soak")
        self.run_id = run_id
        self.turns = turns
        self.spans = 0
        self.conversations = 0
        self.finished = 0
        self.open = [self._new() for _ in range(open_conversations)]
        self.next = 0

    @property
    def started(self) -> int:
        """Conversations that have sent at least one turn."""
        return self.conversations - sum(1 for c in self.open if c.done == 0)

    def _new(self) -> Conversation:
        n = self.conversations
        self.conversations += 1
        low, high = self.turns
        turns = low + n % (high - low + 1)
        return Conversation(n, f"soak-{self.run_id}-{n}", turns, history=[_text("system", SYSTEM)])

    def turn(self) -> None:
        """One turn of the next open conversation (round robin); a finished one is replaced."""
        slot = self.next
        self.next = (self.next + 1) % len(self.open)
        conv = self.open[slot]
        i = conv.done
        user, answer = exchange(conv.number, i, last=i == conv.turns - 1)
        messages = [*conv.history, _text("user", user)]
        with self.tracer.start_as_current_span(
            "invoke_agent shop-bot",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "shop-bot",
                "gen_ai.conversation.id": conv.conv_id,
            },
        ):
            if i == 1 and conv.number % 4 == 1:  # a failed tool call before the answer
                with self.tracer.start_as_current_span(
                    "execute_tool track_parcel",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "track_parcel",
                        "gen_ai.tool.call.id": f"call_{conv.number}",
                        "error.type": "TimeoutError",
                    },
                ) as tool:
                    tool.set_status(Status(StatusCode.ERROR, "courier API timed out"))
                self.spans += 1
            with self.tracer.start_as_current_span(
                "chat gpt-4o-mini",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.conversation.id": conv.conv_id,
                    "gen_ai.input.messages": json.dumps(messages),
                    "gen_ai.output.messages": json.dumps([{**_text("assistant", answer), "finish_reason": "stop"}]),
                    "gen_ai.usage.input_tokens": 40 * len(messages),
                    "gen_ai.usage.output_tokens": 20,
                },
            ):
                pass
        self.spans += 2
        conv.history = [*messages, _text("assistant", answer)]
        conv.done += 1
        if conv.done == conv.turns:
            self.finished += 1
            self.open[slot] = self._new()

    def close(self) -> bool:
        flushed = self.provider.force_flush(60_000)
        self.provider.shutdown()
        return flushed


# -- the OTLP sink's endpoint ---------------------------------------------------------------------


class Collector:
    """An OTLP/HTTP logs endpoint in a thread: answers 200 to every export, counts the log records."""

    def __init__(self) -> None:
        counts = {"requests": 0, "records": 0}
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real collector

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = ExportLogsServiceRequest.FromString(body)
                n = sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
                with lock:
                    counts["requests"] += 1
                    counts["records"] += n
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.counts = counts
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the sidecar ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sidecar:
    """`tracing-eval run --source otlp-http` in a subprocess, its output in a log file."""

    def __init__(
        self,
        env: dict[str, str],
        workdir: Path,
        sinks: Sequence[str],
        prefix: Sequence[str] = (),
        name: str = "sidecar",
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        cmd = [*prefix, str(EXE), "run", "--source", "otlp-http", "--http", f"127.0.0.1:{self.port}"]
        cmd += [arg for s in sinks for arg in ("--sink", s)]
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
        self.http = httpx.Client(timeout=10)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.http.get(f"{self.base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the sidecar did not start:\n{self.log_tail()}")
            time.sleep(0.1)

    def status(self) -> dict[str, float]:
        """VmRSS, VmHWM and RssAnon in MiB, and CPU seconds (user + system) so far."""
        out: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon"):
                out[key] = int(value.split()[0]) / 1024
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_s"] = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        return out

    #: `/metrics` series summed over their labels, by the name a sample gives them
    SUMMED = {
        "tracing_eval_spans_received_total": "spans_received",
        "tracing_eval_outbox_backlog": "outbox_backlog",
        "tracing_eval_threads_ready": "threads_ready",
        "tracing_eval_judge_calls_total": "judge_calls",
        "tracing_eval_evaluations_total": "results",
        "tracing_eval_evaluation_errors_total": "evaluation_errors",
        "tracing_eval_tick_failures_total": "tick_failures",
        "tracing_eval_lost_leases_total": "lost_leases",
        "tracing_eval_receiver_rejects_total": "receiver_rejects",
        "tracing_eval_store_up": "store_up",
    }
    METRIC_KEYS = (*SUMMED.values(), "threads_evaluated", "turn_evaluations", "sink_delivered", "sink_failed")

    def metrics(self) -> dict[str, float]:
        """The `/metrics` series the soak watches, summed over their labels (threads evaluated by mode,
        sink deliveries by delivered or not)."""
        text = self.http.get(f"{self.base}/metrics").text
        out = dict.fromkeys(self.METRIC_KEYS, 0.0)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in self.SUMMED:
                    out[self.SUMMED[s.name]] += s.value
                elif s.name == "tracing_eval_threads_evaluated_total":
                    out["threads_evaluated" if s.labels["mode"] == "thread" else "turn_evaluations"] += s.value
                elif s.name == "tracing_eval_sink_deliveries_total":
                    out["sink_delivered" if s.labels["outcome"] == "delivered" else "sink_failed"] += s.value
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def log_levels(self) -> dict[str, int]:
        """Lines of the sidecar's JSON log by level (lines that are not JSON count as `other`)."""
        levels: dict[str, int] = {}
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                level = str(json.loads(line).get("level", "other"))
            except (ValueError, AttributeError):
                level = "other"
            levels[level] = levels.get(level, 0) + 1
        return levels

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM, then wait for the drain; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"the sidecar did not stop on SIGTERM:\n{self.log_tail()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.http.close()


# -- sampling -------------------------------------------------------------------------------------


class Sampler(threading.Thread):
    """Samples the sidecar every `every` seconds from `start` (time.monotonic) until stopped."""

    def __init__(
        self,
        car: Sidecar,
        feed: Feed,
        collector: Collector | None,
        store_files: Path | None,
        start: float,
        every: float,
        warmup_s: float,
        seconds: float,
    ) -> None:
        super().__init__(daemon=True)
        self.car, self.feed, self.collector, self.store_files = car, feed, collector, store_files
        self.start_at, self.every, self.warmup_s, self.seconds = start, every, warmup_s, seconds
        self.samples: list[dict[str, Any]] = []
        self.stopped = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        k = 0
        while not self.stopped.is_set():
            try:
                self.samples.append(self.sample())
            except Exception as exc:  # a sidecar that died or hangs: the main loop reports it
                self.error = f"{type(exc).__name__}: {exc}"
                return
            k += 1
            self.stopped.wait(max(0.0, self.start_at + k * self.every - time.monotonic()))

    def sample(self) -> dict[str, Any]:
        t = time.monotonic() - self.start_at
        status = self.car.status()
        sent, exported, finished = self.feed.spans, self.feed.exporter.exported, self.feed.finished
        scrape_error = None
        try:
            metrics = self.car.metrics()
        except httpx.HTTPError as exc:  # a slow scrape is worth noting, not ending the soak over
            if not self.samples:
                raise
            scrape_error = f"{type(exc).__name__}: {exc}"
            metrics = {k: float(self.samples[-1][k]) for k in self.car.METRIC_KEYS}
            log(f"  /metrics failed ({scrape_error}); carrying the last values over")
        phase = "warmup" if t < self.warmup_s else "soak" if t <= self.seconds + 0.5 else "drain"
        store = None
        if self.store_files is not None:
            store = sum(p.stat().st_size for p in self.store_files.parent.glob(self.store_files.name + "*")) / MIB
        sample = {
            "t": round(t, 2),
            "phase": phase,
            "rss_mib": round(status["VmRSS"], 2),
            "hwm_mib": round(status["VmHWM"], 2),
            "rss_anon_mib": round(status.get("RssAnon", 0.0), 2),
            "cpu_s": round(status["cpu_s"], 2),
            "spans_sent": sent,
            "spans_exported": exported,
            "conversations": self.feed.started,
            "finished": finished,
            **{k: int(v) for k, v in metrics.items()},
            "collector_events": self.collector.counts["records"] if self.collector else None,
            "store_mib": round(store, 2) if store is not None else None,
            "scrape_error": scrape_error,
        }
        sample["unevaluated"] = finished - sample["threads_evaluated"]
        log(
            f"  t={t:6.0f}s rss={status['VmRSS']:6.1f} MiB sent={sent} received={int(metrics['spans_received'])} "
            f"threads={int(metrics['threads_evaluated'])} turns={int(metrics['turn_evaluations'])} "
            f"ready={int(metrics['threads_ready'])} outbox={int(metrics['outbox_backlog'])}"
        )
        return sample


# -- the verdict ----------------------------------------------------------------------------------


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line through (t, y): (slope, intercept)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    slope = sum((t - mt) * (y - my) for t, y in points) / var if var else 0.0
    return slope, my - slope * mt


def trend(samples: Sequence[dict[str, Any]], key: str, warmup_s: float) -> dict[str, Any] | None:
    """The least-squares line of `key` over the feed's samples after warm-up: its slope (per 10 min),
    its rise over the window, the noise (max - min of the samples around the line) and the raw spread;
    `grew` when rise >= noise. None with fewer than 3 samples."""
    points = [(float(s["t"]), float(s[key])) for s in samples if s["phase"] == "soak"]
    if len(points) < 3:
        return None
    slope, intercept = fit(points)
    residuals = [y - (slope * t + intercept) for t, y in points]
    window = points[-1][0] - warmup_s
    rise, noise = slope * window, max(residuals) - min(residuals)
    ys = [y for _, y in points]
    return {
        "samples": len(points),
        "window_s": round(window, 1),
        "slope_per_10min": round(slope * 600, 3),
        "rise": round(rise, 2),
        "noise": round(noise, 2),
        "spread": round(max(ys) - min(ys), 2),
        "grew": rise >= noise,
    }


# -- one soak -------------------------------------------------------------------------------------


def sidecar_env(
    args: argparse.Namespace, workdir: Path, judge: Judge | None, collector: Collector | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    env.update(
        {
            "TRACING_EVAL_STORE__URL": args.store_url or f"sqlite+aiosqlite:///{workdir / 'store.db'}",
            "TRACING_EVAL_SCHEDULE__TICK_SECONDS": str(args.tick),
            "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": str(args.settle),
            "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": str(args.idle),
            "TRACING_EVAL_SCHEDULE__BATCH_SIZE": str(args.batch),
            "TRACING_EVAL_LOGGING__FORMAT": "json",
            "TRACING_EVAL_LOGGING__LEVEL": args.log_level,
        }
    )
    if args.metrics != "all":
        env["TRACING_EVAL_METRICS__ENABLED"] = json.dumps(args.metrics.split(","))
    if judge is not None:
        env["OPENAI_BASE_URL"] = judge.base_url("soak")
        env["OPENAI_API_KEY"] = "bench"
        env["TRACING_EVAL_JUDGE__MODEL"] = "gpt-4o-mini"
        env["TRACING_EVAL_JUDGE__MAX_CONCURRENCY"] = str(args.judge_concurrency)
        env["TRACING_EVAL_JUDGE__BATCH_THREAD_METRICS"] = "false" if args.unbatched else "true"
    if collector is not None:
        env["TRACING_EVAL_SINKS__OTLP__ENDPOINT"] = collector.endpoint
    return env


def feed_for(feed: Feed, car: Sidecar, sampler: Sampler, start: float, seconds: float, rate: float) -> float:
    """Send spans at `rate` until `seconds` after `start`; the largest lateness of a turn, in seconds."""
    late, checked = 0.0, start
    end = start + seconds
    while True:
        due = start + feed.spans / rate
        if due >= end:
            return late
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            late = max(late, now - due)
        feed.turn()
        if now - checked >= 1.0:
            checked = now
            if not car.alive() or sampler.error:
                raise RuntimeError(f"the sidecar stopped answering ({sampler.error}):\n{car.log_tail()}")


def wait_drained(car: Sidecar, feed: Feed, args: argparse.Namespace) -> float:
    """After the feed: wait (at most `--drain-seconds`) until every conversation was evaluated as a
    whole thread, nothing is ready and the outbox is empty; the seconds waited."""
    started = time.monotonic()
    time.sleep(args.idle + args.tick)
    while time.monotonic() - started < args.drain_seconds:
        m = car.metrics()
        if m["threads_evaluated"] >= feed.started and m["threads_ready"] == 0 and m["outbox_backlog"] == 0:
            break
        time.sleep(1)
    else:
        log(f"the sidecar still had work after {args.drain_seconds:.0f} s (see the last sample)")
    return time.monotonic() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One soak: judge and collector up, the sidecar started, fed, drained and stopped; the samples and
    what the feed, the judge server and the sidecar's log add to them."""
    workdir = Path(tempfile.mkdtemp(prefix="soak-", dir=args.tmp))
    judge = None if args.no_judge else Judge(args.latency)
    collector = Collector() if args.sink_otlp else None
    car = None
    try:
        env = sidecar_env(args, workdir, judge, collector)
        car = Sidecar(env, workdir, ["otlp"] if collector else [])
        log(f"sidecar pid {car.proc.pid} on {car.base}; store {env['TRACING_EVAL_STORE__URL']}; log {car.log_path}")
        open_conversations = max(1, round(args.turn_gap * args.rate / 2))  # 2 spans a turn, some 3
        feed = Feed(f"{car.base}/v1/traces", open_conversations, args.turns, run_id=f"{random.getrandbits(32):08x}")
        store_file = None if args.store_url else workdir / "store.db"
        start = time.monotonic()
        sampler = Sampler(
            car, feed, collector, store_file, start, args.sample_seconds, args.warmup * args.seconds, args.seconds
        )
        sampler.start()
        log(f"feeding {args.rate:g} spans/s for {args.seconds:g} s, {open_conversations} conversations open")
        late = feed_for(feed, car, sampler, start, args.seconds, args.rate)
        fed = time.monotonic() - start
        flushed = feed.close()
        log(f"fed {feed.spans} spans in {fed:.1f} s (flushed: {flushed}); waiting for the sidecar to finish")
        drain_s = wait_drained(car, feed, args)
        sampler.stopped.set()
        sampler.join(30)
        sampler.samples.append(sampler.sample())  # after the wait: the state the sidecar stops in
        levels = car.log_levels()
        exit_code = car.stop()
        log(f"sidecar exited with {exit_code}")
        if exit_code != 0:
            log(car.log_tail())
        judge_stats = judge.stats()["clients"].get("soak", {}) if judge else {}
    finally:
        if car is not None:
            car.kill()
        if collector is not None:
            collector.close()
        if judge is not None:
            judge.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {
        "samples": sampler.samples,
        "feed": {
            "spans_sent": feed.spans,
            "spans_exported": feed.exporter.exported,
            "spans_export_failed": feed.exporter.failed,
            "conversations": feed.started,
            "rate_achieved": round(feed.spans / fed, 1),
            "max_lateness_s": round(late, 3),
        },
        "judge_server": {k: judge_stats[k] for k in ("calls", "errors", "max_in_flight") if k in judge_stats},
        "drain_s": round(drain_s, 1),
        "sidecar_log_lines": levels,
        "sidecar_exit_code": exit_code,
    }


def summarise(run: dict[str, Any], warmup_s: float) -> dict[str, Any]:
    """RSS at the marks, the three trends (RSS, threads not yet evaluated, outbox), the span count check."""
    samples, feed = run["samples"], run["feed"]
    final = samples[-1]
    fed = [s for s in samples if s["phase"] != "drain"]
    rss = trend(samples, "rss_mib", warmup_s)
    backlog, outbox = trend(samples, "unevaluated", warmup_s), trend(samples, "outbox_backlog", warmup_s)
    verdict = (
        "too few samples after warm-up" if rss is None else "RSS grew" if rss["grew"] else "no growth beyond noise"
    )
    return {
        "verdict": verdict,
        "grew": None if rss is None else rss["grew"],
        "rss_first_mib": samples[0]["rss_mib"],
        "rss_after_warmup_mib": next((s for s in samples if s["phase"] == "soak"), final)["rss_mib"],
        "rss_end_mib": fed[-1]["rss_mib"],
        "rss_after_drain_mib": final["rss_mib"],
        "rss_max_mib": max(s["rss_mib"] for s in samples),
        "hwm_mib": final["hwm_mib"],
        "rss": rss,
        "unevaluated": backlog,
        "outbox": outbox,
        "kept_up": None if backlog is None or outbox is None else not (backlog["grew"] or outbox["grew"]),
        **feed,
        "spans_received": final["spans_received"],
        "spans_equal": feed["spans_sent"] == feed["spans_exported"] == final["spans_received"],
        "threads_evaluated": final["threads_evaluated"],
        "all_evaluated": final["threads_evaluated"] >= feed["conversations"],
        "turn_evaluations": final["turn_evaluations"],
        "results": final["results"],
        "judge_calls": final["judge_calls"],
        "judge_server": run["judge_server"],
        "sink_delivered": final["sink_delivered"],
        "sink_failed": final["sink_failed"],
        "collector_events": final["collector_events"],
        "max_outbox_backlog": max(s["outbox_backlog"] for s in samples),
        "max_threads_ready": max(s["threads_ready"] for s in samples),
        "store_down_samples": sum(1 for s in samples if not s["store_up"]),
        "scrape_errors": sum(1 for s in samples if s["scrape_error"]),
        "evaluation_errors": final["evaluation_errors"],
        "tick_failures": final["tick_failures"],
        "lost_leases": final["lost_leases"],
        "receiver_rejects": final["receiver_rejects"],
        "sidecar_cpu_percent": round(100 * final["cpu_s"] / final["t"], 1),
        "store_mib": final["store_mib"],
        "drain_s": run["drain_s"],
        "sidecar_log_lines": run["sidecar_log_lines"],
        "sidecar_exit_code": run["sidecar_exit_code"],
    }


# -- output ---------------------------------------------------------------------------------------


SAMPLE_COLUMNS = (
    ("min", lambda s: f"{s['t'] / 60:.1f}"),
    ("phase", lambda s: s["phase"]),
    ("RSS MiB", lambda s: f"{s['rss_mib']:.1f}"),
    ("anon MiB", lambda s: f"{s['rss_anon_mib']:.1f}"),
    ("spans sent", lambda s: f"{s['spans_sent']:,}"),
    ("spans received", lambda s: f"{s['spans_received']:,}"),
    ("conversations finished", lambda s: f"{s['finished']:,}"),
    ("threads evaluated", lambda s: f"{s['threads_evaluated']:,}"),
    ("not yet evaluated", lambda s: f"{s['unevaluated']:,}"),
    ("turn evaluations", lambda s: f"{s['turn_evaluations']:,}"),
    ("ready", lambda s: f"{s['threads_ready']:,}"),
    ("outbox", lambda s: f"{s['outbox_backlog']:,}"),
    ("judge calls", lambda s: f"{s['judge_calls']:,}"),
    ("store MiB", lambda s: "-" if s["store_mib"] is None else f"{s['store_mib']:.1f}"),
)


def sample_rows(samples: Sequence[dict[str, Any]], every: float) -> list[list[str]]:
    """One sample per `every` seconds (the first at or after each mark), and the last."""
    picked, mark = [], 0.0
    for s in samples:
        if s["t"] >= mark or s is samples[-1]:
            picked.append(s)
            while mark <= s["t"]:
                mark += every
    return [[cell(s) for _, cell in SAMPLE_COLUMNS] for s in picked]


def _trend_rows(name: str, t: dict[str, Any] | None, unit: str) -> list[list[str]]:
    if t is None:
        return [[name, "too few samples after warm-up"]]
    return [
        [
            name,
            f"slope {t['slope_per_10min']:+.2f} {unit} per 10 min; rise {t['rise']:+.2f} over {t['window_s']:.0f} s, "
            f"noise {t['noise']:.2f}, spread {t['spread']:.2f} ({t['samples']} samples): "
            + ("**grew**" if t["grew"] else "no growth beyond noise"),
        ]
    ]


def summary_rows(s: dict[str, Any]) -> list[list[str]]:
    rss = " / ".join(f"{s[f'rss_{n}_mib']:.1f}" for n in ("first", "after_warmup", "end", "after_drain"))
    kept_up = {None: "?", True: "yes", False: "**no**"}[s["kept_up"]]
    return [
        ["RSS first sample / after warm-up / end of feed / after drain", f"{rss} MiB"],
        ["RSS max of samples / VmHWM", f"{s['rss_max_mib']:.1f} / {s['hwm_mib']:.1f} MiB"],
        *_trend_rows("RSS after warm-up", s["rss"], "MiB"),
        [
            "spans sent / exported / received",
            f"{s['spans_sent']:,} / {s['spans_exported']:,} / {s['spans_received']:,} "
            + ("(equal)" if s["spans_equal"] else "(**not equal**)"),
        ],
        ["span rate achieved, largest lateness", f"{s['rate_achieved']:g} spans/s, {s['max_lateness_s']:.3f} s"],
        [
            "conversations started / threads evaluated / turn evaluations",
            f"{s['conversations']:,} / {s['threads_evaluated']:,} / {s['turn_evaluations']:,}",
        ],
        ["every conversation evaluated as a thread by the end", "yes" if s["all_evaluated"] else "**no**"],
        *_trend_rows("finished conversations not yet evaluated", s["unevaluated"], "threads"),
        *_trend_rows("outbox backlog", s["outbox"], "rows"),
        ["kept up (neither backlog grew)", kept_up],
        ["max threads ready / max outbox backlog", f"{s['max_threads_ready']:,} / {s['max_outbox_backlog']:,}"],
        ["results recorded / judge calls", f"{s['results']:,} / {s['judge_calls']:,}"],
        [
            "sink events delivered / failed / received by the collector",
            f"{s['sink_delivered']:,} / {s['sink_failed']:,} / {s['collector_events']}",
        ],
        [
            "samples with store_up 0 / failed /metrics scrapes",
            f"{s['store_down_samples']} / {s['scrape_errors']}",
        ],
        [
            "evaluation errors / tick failures / lost leases / receiver rejects",
            f"{s['evaluation_errors']} / {s['tick_failures']} / {s['lost_leases']} / {s['receiver_rejects']}",
        ],
        [
            "sidecar CPU (mean of one core), store on disk",
            f"{s['sidecar_cpu_percent']:.0f} %, " + ("-" if s["store_mib"] is None else f"{s['store_mib']:.1f} MiB"),
        ],
        ["wait after the feed, sidecar exit code", f"{s['drain_s']:.0f} s, {s['sidecar_exit_code']}"],
        ["sidecar log lines by level", ", ".join(f"{k} {v}" for k, v in sorted(s["sidecar_log_lines"].items()))],
    ]


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(table([name for name, _ in SAMPLE_COLUMNS], sample_rows(result["samples"], args.table_every)))
    print()
    print(table(["summary", "value"], summary_rows(result["summary"])))
    s = result["summary"]
    if s["kept_up"] is False or not s["all_evaluated"]:
        print("\nnote: the sidecar did not keep up with this feed (see the backlog rows): not a steady state")
    print(f"\n**{s['verdict']}**")


def turn_range(text: str) -> tuple[int, int]:
    """`MIN-MAX` (or one number) as (min, max)."""
    low, _, high = text.partition("-")
    pair = (int(low), int(high or low))
    if not 1 <= pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"want MIN-MAX with 1 <= MIN <= MAX, got {text!r}")
    return pair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1800, help="how long to feed spans")
    ap.add_argument("--rate", type=float, default=100, help="spans per second")
    ap.add_argument("--sample-seconds", type=float, default=10, help="seconds between RSS samples")
    ap.add_argument("--warmup", type=float, default=0.2, help="share of the feed left out of the slope")
    ap.add_argument("--store-url", help="store URL (e.g. postgresql+asyncpg://...); default: SQLite in a temp dir")
    ap.add_argument("--no-judge", action="store_true", help="deterministic metrics only")
    ap.add_argument(
        "--unbatched",
        action="store_true",
        help="judge.batch_thread_metrics off: one call per judged metric (as in the run of 2026-11-30)",
    )
    ap.add_argument("--latency", type=float, default=0.05, help="judge latency in seconds")
    ap.add_argument("--judge-concurrency", type=int, default=8, help="judge.max_concurrency of the sidecar")
    ap.add_argument("--metrics", default=METRICS, help="comma-separated metrics to run, or `all` (the product's list)")
    ap.add_argument("--no-sink", dest="sink_otlp", action="store_false", help="local sink only (no OTLP sink)")
    ap.add_argument("--tick", type=float, default=1.0, help="schedule.tick_seconds")
    ap.add_argument("--settle", type=float, default=2.0, help="schedule.turn_settle_seconds")
    ap.add_argument("--idle", type=float, default=5.0, help="schedule.thread_idle_seconds")
    ap.add_argument("--batch", type=int, default=200, help="schedule.batch_size (threads claimed per tick)")
    ap.add_argument("--turns", type=turn_range, default=(6, 9), help="turns per conversation, MIN-MAX")
    ap.add_argument("--turn-gap", type=float, default=3.0, help="seconds between two turns of one conversation")
    ap.add_argument("--drain-seconds", type=float, default=120, help="longest wait for the sidecar after the feed")
    ap.add_argument("--log-level", default="info", help="the sidecar's logging.level")
    ap.add_argument("--table-every", type=float, default=60, help="seconds between rows of the samples table")
    ap.add_argument("--tmp", help="where the temporary folder goes (default: the system's; not a tmpfs)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (store, sidecar log)")
    ap.add_argument("--json", default="soak.json", help="file name under bench/out/ ('' for none)")
    args = ap.parse_args()
    if not args.settle < args.turn_gap < args.idle:
        log("note: --turn-gap is not between --settle and --idle; threads will not be evaluated turn by turn")
    ramp = args.turns[1] * args.turn_gap + args.idle + 10 * args.tick
    if args.warmup * args.seconds < ramp:
        log(
            f"note: the warm-up ({args.warmup * args.seconds:.0f} s) is shorter than the ramp to a steady state "
            f"(about {ramp:.0f} s: the longest conversation, thread idle and a few ticks); the trends include it"
        )

    soak = run(args)
    result = {"samples": soak["samples"], "summary": summarise(soak, args.warmup * args.seconds)}
    report(result, args)
    if args.json:
        log(f"wrote {write_json(args.json, {'machine': machine(), 'params': vars(args), **result})}")
    s = result["summary"]
    if s["grew"] or not s["spans_equal"] or s["sidecar_exit_code"] != 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
