"""Replicas for tests/test_postgres.py, run in spawned processes: this module imports only the
store, so a child starts quickly."""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, UniqueConstraint, func, select, update
from sqlalchemy.exc import IntegrityError

from tests.support.results import score_result
from tracing_eval.model import Scope, Span
from tracing_eval.store import schema
from tracing_eval.store.base import IngestBatch, Outgoing, Readiness
from tracing_eval.store.sql import SqlStore

SETTLED = Readiness(turn_settle=0.0, thread_idle=0.0)

#: What a replica "evaluated": a unique key on (thread, version) makes a second evaluation of the
#: same thread version an error, whoever does it.
probe = MetaData()
evaluations = Table(
    "evaluations",
    probe,
    Column("thread_key", String, nullable=False),
    Column("version", Integer, nullable=False),
    Column("owner", String, nullable=False),
    Column("started", Float, nullable=False),
    Column("finished", Float),
    UniqueConstraint("thread_key", "version", name="uq_evaluation"),
)


def turn(n: int, k: int) -> Span:
    """Span `k` (turn k) of conversation `n`."""
    return Span(trace_id=f"{n:08x}{k:024x}", span_id=f"{k + 1:016x}", name="chat", start_ns=1 + k)


def conversations(ids: range, k: int) -> IngestBatch:
    spans = [turn(n, k) for n in ids]
    return IngestBatch(spans=spans, conversations={s.trace_id: f"conv-{n}" for n, s in zip(ids, spans, strict=True)})


# -- replicas in their own processes (spawned: the functions below run in the child) ------------


def replica(url: str, owner: str, barrier: Any, grown: Any, out: Any) -> None:
    out.put(asyncio.run(claim_and_record(url, owner, barrier, grown)))


async def claim_and_record(url: str, owner: str, barrier: Any, grown: Any) -> dict[str, Any]:
    """Claim, "evaluate" (a row in `evaluations` plus a random delay) and record, until the feeder
    is done and no thread is owed an evaluation. A second evaluation of a thread version is noted
    and carried on with, as a replica would, so a broken claim fails the test quickly."""
    store = SqlStore(url)
    await store.open()
    th = schema.threads.c
    owed_q = select(func.count()).select_from(schema.threads).where(th.evaluated_version < th.version)
    report: dict[str, Any] = {"owner": owner, "recorded": 0, "lost": 0, "twice": [], "not_mine": [], "timeout": False}
    await asyncio.to_thread(barrier.wait)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            claims = await store.claim(owner, time.time(), SETTLED, 5, 60)
            if not claims:
                async with store.engine.connect() as conn:
                    owed = (await conn.execute(owed_q)).scalar()
                if grown.is_set() and not owed:
                    return report
                await asyncio.sleep(0.005)
                continue
            for c in claims:
                first = True
                try:
                    async with store.engine.begin() as conn:
                        holder = (await conn.execute(select(th.lease_owner).where(th.key == c.thread_key))).scalar()
                        await conn.execute(
                            evaluations.insert().values(
                                thread_key=c.thread_key, version=c.version, owner=owner, started=time.time()
                            )
                        )
                except IntegrityError:  # the unique key: this thread version was evaluated already
                    report["twice"].append((c.thread_key, c.version))
                    first = False
                if holder != owner:
                    report["not_mine"].append((c.thread_key, holder))
                await asyncio.sleep(random.uniform(0, 0.004))  # the judge
                if first:
                    async with store.engine.begin() as conn:  # done evaluating; the lease is still ours
                        await conn.execute(
                            update(evaluations)
                            .where(evaluations.c.thread_key == c.thread_key, evaluations.c.version == c.version)
                            .values(finished=time.time())
                        )
                score = 1.0 / c.version  # a new version changes the result, so the outbox owes it again
                res = score_result("m", score, threshold=0.5, scope=Scope.THREAD)
                recorded = await store.record(
                    c, [Outgoing(f"r-{c.thread_key}", "thread", res)], None, ["hook"], time.time()
                )
                report["recorded" if recorded else "lost"] += 1
        report["timeout"] = True
        return report
    finally:
        await store.close()


def open_at_once(url: str, barrier: Any, out: Any) -> None:
    async def go() -> str:
        store = SqlStore(url)
        barrier.wait()
        try:
            await store.open()
            return "ok"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            await store.close()

    out.put(asyncio.run(go()))


#: The lease `claim_then_die` takes, in seconds of the clock it reports.
CRASHED_LEASE = 1.5


def claim_then_die(url: str, out: Any) -> None:
    """In a child process: claim every ready thread, put (the claim's time, the thread keys) on `out`,
    then die without releasing anything."""

    async def go() -> None:
        store = SqlStore(url)
        await store.open()
        now = time.time()
        claims = await store.claim("crashed", now, SETTLED, 10, CRASHED_LEASE)
        out.put((now, [c.thread_key for c in claims]))

    asyncio.run(go())
    out.close()
    out.join_thread()  # the claim reached the parent; now die without a word
    os._exit(1)  # no record, no release, connections cut: like a replica killed mid-evaluation
