"""Crash and fault proofs, short versions (the full ones: `bench/chaos.py`, figures in docs/reliability.md).

Real `tracing-eval run` replicas on one PostgreSQL database receive conversations over OTLP and write
scores and review items to the fake Langfuse (every request checked against its OpenAPI spec), with
a fake judge. The outcome is compared with an undisturbed run of the same input on SQLite: every
result, score and review item must be there, with the same values, once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import pg_database
from tests.support import chaos

THREADS = 24


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> chaos.Outcome:
    """One replica on SQLite, no kills, no faults."""
    out = chaos.run(chaos.Plan(threads=THREADS, replicas=1), tmp_path_factory.mktemp("reference"))
    assert out.threads == THREADS and out.outbox["delivered"] and not out.outbox["failed"]
    assert out.queue_items and out.scores, "the input must produce scores and review items to check"
    return out


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_database() as url:
        yield url


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_replicas_killed_at_random_moments_leave_every_score_exactly_once(
    reference: chaos.Outcome, pg_url: str, tmp_path: Path, transport: str
) -> None:
    """Over OTLP/HTTP and over OTLP/gRPC: an acknowledgement on either is as durable."""
    plan = chaos.Plan(
        threads=THREADS,
        replicas=2,
        store_url=pg_url,
        kill_interval=(0.5, 1.5),
        max_kills=6,
        min_kills=6,  # the work may be done before the sixth kill is due (a busy machine starts replicas slowly)
        min_uptime=2.5,
        load_seconds=5,
        transport=transport,
    )
    got = chaos.run(plan, tmp_path)
    assert got.kills == 6 and got.exits[-9] == 6, got.summary()
    assert chaos.compare(reference, got) == [], got.summary()
    assert got.outbox["failed"] == 0 and sum(got.score_writes.values()) >= len(got.scores)


def test_a_faulty_langfuse_and_judge_end_with_everything_delivered_or_recorded_as_an_error(
    reference: chaos.Outcome, pg_url: str, tmp_path: Path
) -> None:
    plan = chaos.Plan(
        threads=THREADS,
        replicas=4,  # deliveries wait on hangs and Retry-After: more replicas wait side by side
        store_url=pg_url,
        langfuse_fault_rate=0.3,
        judge_fault_rate=0.2,
    )
    got = chaos.run(plan, tmp_path)
    assert chaos.compare(reference, got, faults=True) == [], got.summary()
    assert set(got.langfuse_faults) == {429, 499, 503}, got.summary()  # 499: hung until the client gave up
    assert got.judge_faults["malformed"] and got.judge_faults["late"], got.summary()
    assert got.judge_calls > reference.judge_calls, "the judge faults must have cost retries"
    failed = got.outbox["failed"]
    assert got.outbox["delivered"] + failed == reference.outbox["delivered"]
