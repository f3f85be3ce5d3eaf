"""Crash and fault runs: `tracing-eval run` replicas on one store, SIGKILLed and restarted at random
moments and/or facing a faulty Langfuse and judge, compared with an undisturbed run of the same input.

`run(plan, workdir)` starts the fake Langfuse (v4, every request checked against its OpenAPI spec) and
the fake judge in this process, then `plan.replicas` sidecars (`--source otlp-http --sink langfuse`).
A loader sends the conversations as OTLP/protobuf, whole conversations per request, to a random
replica, and resends what was not answered 200 (as an exporter does). A supervisor SIGKILLs a random
replica every `kill_interval` seconds and starts it again at once, until the store says everything is
done (every thread evaluated at its last version, nothing left in the outbox) and `min_kills` kills
happened. `compare(reference,
run)` lists every difference between two outcomes that the promises forbid: a result or score missing
or extra, a value that differs, a score or review item written twice. Used by `tests/test_chaos.py`
(short runs) and `bench/chaos.py` (the full runs, figures in docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus
from sqlalchemy import func, select

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tests.support.sidecar_process import clean_env, free_port
from tracing_eval.config import DETERMINISTIC_PACK
from tracing_eval.connectors.otlp.grpc_receiver import TRACE_SERVICE
from tracing_eval.store import schema
from tracing_eval.store.sql import SqlStore

#: The judged metrics of the runs (one call each per thread), next to the deterministic pack.
JUDGED = ["completeness", "conversational_flow"]
#: Review routing watches the deterministic metrics only, so judge faults cannot change who is routed.
ROUTED_ON = ["reask", "repetition", "refusal_loop", "tool_errors", "user_friction"]
#: Log lines counted per run (each replica's output, every incarnation).
LOG_EVENTS = {
    "lease_lost": "lease lost before results were recorded",
    "evaluation_failed": "thread evaluation failed",
    "delivery_failed": "sink delivery failed",
    "drained": "gave back leases",
}


@dataclass(frozen=True)
class Plan:
    threads: int = 40
    replicas: int = 2
    store_url: str | None = None  # None: SQLite in the work folder (then one replica)
    kill_interval: tuple[float, float] | None = None  # seconds between SIGKILLs, uniform; None: no kills
    max_kills: int = 10_000
    min_kills: int = 0  # the run goes on (idle or not) until this many kills: a fast run cannot skip them
    min_uptime: float = 3.0  # a replica is killed only after running this long (past its start-up)
    langfuse_fault_rate: float = 0.0  # share of Langfuse requests answered 429/503 (2/3) or hung (1/3)
    judge_fault_rate: float = 0.0  # share of judge calls answered with malformed JSON (1/2) or too late (1/2)
    load_seconds: float = 2.0  # the loader spreads the conversations over this long
    threads_per_request: int = 5
    seed: int = 1
    liveness_seconds: float = 600.0  # a run not done by then is stuck (not a speed check)
    transport: str = "http"  # how the loader sends: OTLP/HTTP or OTLP/gRPC


@dataclass
class Outcome:
    """What a run left behind, read from the store and the fakes."""

    results: dict[str, tuple[str, str, str, float | None, str | None]]  # id -> thread, metric, status, score, label
    scores: dict[str, tuple[Any, ...]]  # fake Langfuse score rows by id
    score_writes: Counter[str]  # score writes the fake received, by id
    score_configs: dict[str, set[str | None]]  # config ids used per score name
    queue_items: Counter[tuple[str, str]]
    comment_markers: Counter[str]  # review markers ("thread … · version n") in comments
    review_items: Counter[tuple[str, int]]  # the store's review items by (thread, version)
    threads: int
    threads_failed: int
    outbox: Counter[str]  # delivered / failed / pending
    outbox_errors: list[str]
    judge_calls: int
    judge_faults: Counter[str]  # malformed / late answers the judge gave
    langfuse_faults: Counter[int]  # Langfuse answers by injected status (499: hung until the client left)
    spec_violations: list[str]
    seconds: float
    kills: int = 0
    leases_held_at_kills: int = 0
    requests: int = 0
    request_retries: int = 0
    exits: Counter[int] = field(default_factory=Counter)
    log_counts: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        errors = sum(1 for r in self.results.values() if r[2] == "error")
        return {
            "threads": self.threads,
            "results": len(self.results),
            "results_error": errors,
            "scores": len(self.scores),
            "score_writes": sum(self.score_writes.values()),
            "queue_items": sum(self.queue_items.values()),
            "outbox": dict(self.outbox),
            "judge_calls": self.judge_calls,
            "judge_faults": dict(self.judge_faults),
            "langfuse_faults": dict(self.langfuse_faults),
            "kills": self.kills,
            "leases_held_at_kills": self.leases_held_at_kills,
            "requests": self.requests,
            "request_retries": self.request_retries,
            "exit_codes": dict(self.exits),
            "log": dict(self.log_counts),
            "seconds": round(self.seconds, 1),
        }


# -- the conversations ------------------------------------------------------------------------------


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def conversation_id(plan: Plan, n: int) -> str:
    return f"chaos-{plan.seed}-{n}"


def conversation(plan: Plan, n: int) -> list[PbSpan]:
    """Conversation `n`: 1 to 4 turns, each an `invoke_agent` root with a `chat` child (and, in some,
    a failed `execute_tool`). Every fourth conversation has an agent that keeps asking the same
    question, so it fails the deterministic checks and is routed to review."""
    conv = conversation_id(plan, n)
    rng = random.Random(f"{plan.seed}:{n}")
    order = 1000 + n
    history: list[dict[str, Any]] = [_text("system", "You are the support agent of an online shop.")]
    spans: list[PbSpan] = []
    start = 1_750_000_000 * 10**9 + n * 10**11
    for k in range(1 + n % 4):
        trace_id = hashlib.sha256(f"{conv}:{k}".encode()).digest()[:16]
        root_id = hashlib.sha256(f"{conv}:{k}:root".encode()).digest()[:8]
        user = (
            f"Where is my order {order}?" if k == 0 else rng.choice(["And when will it arrive?", "Thanks, what else?"])
        )
        if n % 4 == 0:
            answer = "Could you tell me your order number?"
        else:
            answer = f"Order {order} is {rng.choice(['packed', 'shipped', 'out for delivery'])} (step {k + 1})."
        history.append(_text("user", user))
        t0 = start + k * 10**9
        spans.append(
            PbSpan(
                trace_id=trace_id,
                span_id=root_id,
                name="invoke_agent support",
                kind=PbSpan.SPAN_KIND_INTERNAL,
                start_time_unix_nano=t0,
                end_time_unix_nano=t0 + 9 * 10**8,
                attributes=[_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.conversation.id", conv)],
            )
        )
        if n % 6 == 1:
            spans.append(
                PbSpan(
                    trace_id=trace_id,
                    span_id=hashlib.sha256(f"{conv}:{k}:tool".encode()).digest()[:8],
                    parent_span_id=root_id,
                    name="execute_tool lookup_order",
                    start_time_unix_nano=t0 + 10**6,
                    end_time_unix_nano=t0 + 2 * 10**6,
                    attributes=[_kv("gen_ai.operation.name", "execute_tool"), _kv("gen_ai.tool.name", "lookup_order")],
                    status=PbStatus(code=PbStatus.STATUS_CODE_ERROR, message="order service timed out"),
                )
            )
        spans.append(
            PbSpan(
                trace_id=trace_id,
                span_id=hashlib.sha256(f"{conv}:{k}:chat".encode()).digest()[:8],
                parent_span_id=root_id,
                name="chat gpt-4o",
                kind=PbSpan.SPAN_KIND_CLIENT,
                start_time_unix_nano=t0 + 3 * 10**6,
                end_time_unix_nano=t0 + 8 * 10**8,
                attributes=[
                    _kv("gen_ai.operation.name", "chat"),
                    _kv("gen_ai.request.model", "gpt-4o"),
                    _kv("gen_ai.conversation.id", conv),
                    _kv("gen_ai.input.messages", json.dumps(history)),
                    _kv("gen_ai.output.messages", json.dumps([_text("assistant", answer)])),
                ],
            )
        )
        history.append(_text("assistant", answer))
    return spans


def requests_of(plan: Plan) -> list[bytes]:
    """The OTLP/protobuf bodies: `threads_per_request` whole conversations each."""
    bodies = []
    for first in range(0, plan.threads, plan.threads_per_request):
        spans = [
            s for n in range(first, min(plan.threads, first + plan.threads_per_request)) for s in conversation(plan, n)
        ]
        request = ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource={"attributes": [_kv("service.name", "shop-support")]},
                    scope_spans=[ScopeSpans(scope={"name": "chaos"}, spans=spans)],
                )
            ]
        )
        bodies.append(request.SerializeToString())
    return bodies


# -- the fakes --------------------------------------------------------------------------------------


class FaultyJudge:
    """Valid answers (`SchemaJudge`), except a share `rate` of calls: malformed JSON, or a valid answer
    after `late_seconds` (past the client's timeout). Reproducible per request and attempt."""

    def __init__(self, rate: float, seed: int, late_seconds: float) -> None:
        self.inner = SchemaJudge()
        self.rate, self.seed, self.late_seconds = rate, seed, late_seconds
        self.faults: Counter[str] = Counter()
        self._attempts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        digest = hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode()).hexdigest()
        with self._lock:
            self._attempts[digest] += 1
            chance = random.Random(f"{self.seed}:{digest}:{self._attempts[digest]}")
            if chance.random() >= self.rate:
                return self.inner(request)
            kind = "malformed" if chance.random() < 0.5 else "late"
            self.faults[kind] += 1
        if kind == "malformed":
            return Reply('{"verdict": "complete", "reason": ')
        return replace(self.inner(request), delay=self.late_seconds)


# -- replicas ---------------------------------------------------------------------------------------


class Replica:
    """One `tracing-eval run` process on a fixed port; every incarnation appends to one log file."""

    def __init__(self, index: int, env: dict[str, str], workdir: Path) -> None:
        self.port, self.grpc_port = free_port(), free_port()
        self.index, self.workdir = index, workdir
        self.env = {**env, "TRACING_EVAL_RECEIVER__GRPC_ADDRESS": f"127.0.0.1:{self.grpc_port}"}
        self.log = workdir / f"replica-{index}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.exits: Counter[int] = Counter()

    @property
    def owner(self) -> str:
        """The lease owner the process writes (see `app.build_pipeline`)."""
        assert self.proc is not None
        return f"{socket.gethostname()}:{self.proc.pid}"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "tracing_eval", "run", "--source", "otlp-http", "--sink", "langfuse"]
        self.started_at = time.monotonic()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--http", f"127.0.0.1:{self.port}"],
                env=self.env,
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.exits[self.proc.wait()] += 1

    def stop(self) -> None:
        """SIGTERM and wait for the drain."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"replica {self.index} did not stop on SIGTERM") from None
        self.exits[self.proc.returncode] += 1


class Loader(threading.Thread):
    """Sends every body to a random replica until one answers 200; refusals and broken connections are
    retried elsewhere after a short pause, like an OTLP exporter."""

    def __init__(self, bodies: list[bytes], replicas: list[Replica], plan: Plan) -> None:
        super().__init__(name="chaos-loader", daemon=True)
        self.bodies, self.replicas, self.plan = bodies, replicas, plan
        self.sent = 0
        self.retries = 0
        self.error: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        rng = random.Random(self.plan.seed)
        pause = self.plan.load_seconds / max(1, len(self.bodies))
        try:
            with httpx.Client(timeout=10) as client:
                for body in self.bodies:
                    while not self._send(client, rng.choice(self.replicas), body):
                        self.retries += 1
                        time.sleep(0.05)
                    self.sent += 1
                    time.sleep(pause)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def _send(self, client: httpx.Client, replica: Replica, body: bytes) -> bool:
        """True when the replica acknowledged the body; a retryable refusal or a broken connection is
        False, anything else an error."""
        if self.plan.transport == "grpc":
            with grpc.insecure_channel(f"127.0.0.1:{replica.grpc_port}") as channel:
                export = channel.unary_unary(f"/{TRACE_SERVICE}/Export")
                try:
                    export(body, timeout=10)
                    return True
                except grpc.RpcError as error:
                    retry = (
                        grpc.StatusCode.UNAVAILABLE,  # also a replica killed mid-call, or not up yet
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.CANCELLED,
                    )
                    if error.code() in retry:
                        return False
                    raise AssertionError(f"the gRPC receiver answered {error.code()}: {error.details()}") from None
        try:
            r = client.post(
                f"http://127.0.0.1:{replica.port}/v1/traces",
                content=body,
                headers={"content-type": "application/x-protobuf"},
            )
        except httpx.HTTPError:
            return False
        if r.status_code == 200:
            return True
        if r.status_code not in (429, 502, 503, 504):
            raise AssertionError(f"the receiver answered {r.status_code}: {r.text[:300]}")
        return False


def replica_env(plan: Plan, workdir: Path, store_url: str, langfuse: FakeLangfuseServer, judge_url: str) -> dict:
    return clean_env(
        workdir,
        {
            "TRACING_EVAL_STORE__URL": store_url,
            "TRACING_EVAL_SCHEDULE__TICK_SECONDS": "0.5",
            "TRACING_EVAL_SCHEDULE__TURN_SETTLE_SECONDS": "1",
            "TRACING_EVAL_SCHEDULE__THREAD_IDLE_SECONDS": "2",
            "TRACING_EVAL_SCHEDULE__LEASE_SECONDS": "15",  # > one evaluation, judge retries included
            "TRACING_EVAL_SCHEDULE__BATCH_SIZE": "10",
            "TRACING_EVAL_SCHEDULE__DRAIN_SECONDS": "5",
            "TRACING_EVAL_SINKS__LEASE_SECONDS": "30",  # > one delivery: 5 tries of 2 s + waits
            "TRACING_EVAL_SINKS__MAX_ATTEMPTS": "30",
            "TRACING_EVAL_METRICS__ENABLED": json.dumps([*DETERMINISTIC_PACK, *JUDGED]),
            "TRACING_EVAL_REVIEW__METRICS": json.dumps(ROUTED_ON),
            "TRACING_EVAL_JUDGE__MODEL": "gpt-4o-mini",
            "TRACING_EVAL_JUDGE__TIMEOUT_SECONDS": "2",
            "TRACING_EVAL_JUDGE__MAX_CONCURRENCY": "4",
            "OPENAI_API_KEY": "sk-chaos-test",
            "OPENAI_BASE_URL": judge_url,
            "LANGFUSE_BASE_URL": langfuse.base_url,
            "LANGFUSE_PUBLIC_KEY": langfuse.public_key,
            "LANGFUSE_SECRET_KEY": langfuse.secret_key,
            "TRACING_EVAL_LANGFUSE__TIMEOUT_SECONDS": "2",
            "TRACING_EVAL_LANGFUSE__RETRY_BACKOFF_SECONDS": "0.05",
            "TRACING_EVAL_LANGFUSE__MAX_RETRY_WAIT_SECONDS": "5",
            "TRACING_EVAL_LOGGING__FORMAT": "json",
        },
    )


# -- the run ----------------------------------------------------------------------------------------


async def _done(store: SqlStore, threads: int) -> bool:
    """Every thread is known and evaluated at its version (or parked as failed), the outbox is settled."""
    th, ob = schema.threads.c, schema.outbox.c
    async with store.engine.connect() as conn:
        known = (await conn.execute(select(func.count()).select_from(schema.threads))).scalar_one()
        owed = (
            await conn.execute(
                select(func.count())
                .select_from(schema.threads)
                .where(th.status == "active", th.evaluated_version < th.version)
            )
        ).scalar_one()
        pending = (
            await conn.execute(
                select(func.count()).select_from(schema.outbox).where(ob.delivered_at.is_(None), ob.failed.is_(False))
            )
        ).scalar_one()
    return known == threads and owed == 0 and pending == 0


async def _leases_of(store: SqlStore, owner: str) -> int:
    th = schema.threads.c
    async with store.engine.connect() as conn:
        query = select(func.count()).select_from(schema.threads).where(th.lease_owner == owner)
        return int((await conn.execute(query)).scalar_one())


async def _supervise(plan: Plan, store: SqlStore, replicas: list[Replica], loader: Loader, out: Outcome) -> None:
    rng = random.Random(plan.seed * 7919)
    started = time.monotonic()
    next_kill = started + rng.uniform(*plan.kill_interval) if plan.kill_interval else float("inf")
    while not (loader.done.is_set() and out.kills >= plan.min_kills and await _done(store, plan.threads)):
        if loader.error is not None:
            raise AssertionError(f"the loader stopped: {loader.error}")
        if time.monotonic() - started > plan.liveness_seconds:
            raise AssertionError(f"not done after {plan.liveness_seconds:.0f} s: {out.summary()}")
        up = [r for r in replicas if time.monotonic() - r.started_at >= plan.min_uptime]
        if plan.kill_interval and time.monotonic() >= next_kill and out.kills < plan.max_kills and up:
            victim = rng.choice(up)
            out.leases_held_at_kills += await _leases_of(store, victim.owner)
            victim.kill()
            victim.start()
            out.kills += 1
            next_kill = time.monotonic() + rng.uniform(*plan.kill_interval)
        await asyncio.sleep(0.1)


async def _read_store(store: SqlStore, out: Outcome) -> None:
    out.results = {
        r.id: (r.thread_key, r.result.metric, r.result.status.value, r.result.score, r.result.label)
        for r in await store.results()
    }
    out.review_items = Counter((i.thread_key, i.thread_version) for i in await store.review_items(status=None))
    ob = schema.outbox.c
    async with store.engine.connect() as conn:
        for delivered, failed, error in await conn.execute(select(ob.delivered_at, ob.failed, ob.last_error)):
            out.outbox["delivered" if delivered is not None else "failed" if failed else "pending"] += 1
            if failed:
                out.outbox_errors.append(str(error))
    states = await store.thread_states()
    out.threads = len(states)
    out.threads_failed = sum(1 for s in states if s["status"] != "active")


def _read_fakes(langfuse: FakeLangfuseServer, judge: FakeOpenAIServer, out: Outcome) -> None:
    for s in langfuse.scores:
        out.scores[s.id] = (s.name, s.value, s.string_value, s.trace_id, s.observation_id, s.session_id, s.timestamp)
        out.score_configs.setdefault(s.name, set()).add(s.config_id)
    out.score_writes = Counter(w.score_id for w in langfuse.score_requests)
    out.queue_items = Counter((i.object_type, i.object_id) for i in langfuse.queue_items)
    for c in langfuse.comments:
        for line in c.content.splitlines():
            if line.startswith("tracing-eval review · thread "):
                out.comment_markers[line.rsplit(" · queue item", 1)[0]] += 1
    out.judge_calls = sum(1 for r in judge.requests if r.path.endswith("/chat/completions"))
    out.langfuse_faults = Counter(r.status for r in langfuse.requests if r.status in (429, 499, 503))
    out.spec_violations = list(langfuse.violations)


def run(plan: Plan, workdir: Path) -> Outcome:
    """One run of `plan` in `workdir` (its store, logs); see the module docstring."""
    workdir.mkdir(parents=True, exist_ok=True)
    store_url = plan.store_url or f"sqlite+aiosqlite:///{workdir / 'store.db'}"
    if plan.store_url is None and plan.replicas != 1:
        raise ValueError("SQLite serves one replica")
    bodies = requests_of(plan)
    judge_handler = FaultyJudge(plan.judge_fault_rate, plan.seed, late_seconds=3.0)
    out = Outcome(
        {}, {}, Counter(), {}, Counter(), Counter(), Counter(), 0, 0, Counter(), [], 0, Counter(), Counter(), [], 0.0
    )
    with FakeLangfuseServer("v4") as langfuse, FakeOpenAIServer(judge_handler) as judge:
        for n in range(plan.threads):  # Langfuse's copy of each conversation (review comments need it)
            langfuse.seed_session(conversation_id(plan, n), [("hi", "hello", None, None)])
        if plan.langfuse_fault_rate:
            langfuse.set_failure_rate(
                plan.langfuse_fault_rate, seed=plan.seed, statuses=(429, 503), hang_share=1 / 3, hang_seconds=3.0
            )
        env = replica_env(plan, workdir, store_url, langfuse, judge.base_url)
        replicas = [Replica(i, env, workdir) for i in range(plan.replicas)]
        started = time.monotonic()
        for r in replicas:
            r.start()
        loader = Loader(bodies, replicas, plan)
        loader.start()
        try:
            asyncio.run(_with_store(store_url, lambda store: _supervise(plan, store, replicas, loader, out)))
        finally:
            for r in replicas:
                r.stop()
        out.seconds = time.monotonic() - started
        asyncio.run(_with_store(store_url, lambda store: _read_store(store, out)))
        _read_fakes(langfuse, judge, out)
        out.judge_faults = judge_handler.faults
    out.requests, out.request_retries = loader.sent, loader.retries
    for r in replicas:
        out.exits.update(r.exits)
        text = r.log.read_text(errors="replace")
        for name, needle in LOG_EVENTS.items():
            out.log_counts[name] += text.count(needle)
    return out


async def _with_store(url: str, work: Any) -> None:
    store = SqlStore(url)
    await store.open()
    try:
        await work(store)
    finally:
        await store.close()


# -- the verdict ------------------------------------------------------------------------------------


def compare(reference: Outcome, got: Outcome, *, faults: bool = False) -> list[str]:
    """What `got` breaks of the promises, measured against the undisturbed `reference`. With `faults`,
    a result may end as `error` where the reference has a value, and a delivery may end failed with
    its error recorded; nothing may be missing, extra, different or written twice."""
    problems: list[str] = []
    if got.threads != reference.threads or got.threads_failed:
        problems.append(f"threads: {got.threads} ({got.threads_failed} failed), reference {reference.threads}")
    if missing := reference.results.keys() - got.results.keys():
        problems.append(f"{len(missing)} results missing, e.g. {sorted(missing)[:3]}")
    if extra := got.results.keys() - reference.results.keys():
        problems.append(f"{len(extra)} results extra, e.g. {sorted(extra)[:3]}")
    for rid in reference.results.keys() & got.results.keys():
        want, have = reference.results[rid], got.results[rid]
        if have != want and not (faults and have[2] == "error"):
            problems.append(f"result {rid}: {have} != reference {want}")
    if got.outbox["pending"]:
        problems.append(f"{got.outbox['pending']} outbox rows still pending")
    if got.outbox["failed"] and not faults:
        problems.append(f"{got.outbox['failed']} deliveries failed: {got.outbox_errors[:3]}")
    if any(not e or e == "None" for e in got.outbox_errors):
        problems.append("a failed delivery has no error recorded")
    scored = {rid for rid, r in got.results.items() if r[2] == "ok" and r[3] is not None}
    if not_written := scored - got.scores.keys():
        if not faults or len(not_written) > got.outbox["failed"]:
            problems.append(f"{len(not_written)} scores not in Langfuse, e.g. {sorted(not_written)[:3]}")
    if unexpected := got.scores.keys() - scored:
        problems.append(f"{len(unexpected)} scores in Langfuse without an ok result, e.g. {sorted(unexpected)[:3]}")
    for sid in got.scores.keys() & reference.scores.keys():
        if got.scores[sid] != reference.scores[sid]:
            problems.append(f"score {sid}: {got.scores[sid]} != reference {reference.scores[sid]}")
    targets = Counter(row[0:1] + row[3:6] for row in got.scores.values())
    if twice := [t for t, n in targets.items() if n > 1]:
        problems.append(f"{len(twice)} score targets hold two score ids, e.g. {twice[:3]}")
    if split := {name: ids for name, ids in got.score_configs.items() if len(ids) > 1}:
        problems.append(f"scores of one name point at different configs: {split}")
    if twice := [k for k, n in got.queue_items.items() if n > 1]:
        problems.append(f"queue items written twice: {twice[:3]}")
    if twice := [k for k, n in got.comment_markers.items() if n > 1]:
        problems.append(f"review comments written twice: {twice[:3]}")
    if twice := [k for k, n in got.review_items.items() if n > 1]:
        problems.append(f"review items stored twice: {twice[:3]}")
    routed = {key for key, _ in got.review_items}
    if routed != {key for key, _ in reference.review_items}:
        problems.append(f"routed threads differ: {sorted(routed ^ {k for k, _ in reference.review_items})[:5]}")
    in_queue = {f"otlp:{object_id}" for _, object_id in got.queue_items}
    if in_queue != routed and not (faults and in_queue <= routed):
        problems.append(f"queue items {len(in_queue)} != routed threads {len(routed)}")
    if got.spec_violations:
        problems.append(f"requests the Langfuse spec refuses: {got.spec_violations[:3]}")
    return problems
