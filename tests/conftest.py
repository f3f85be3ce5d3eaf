"""Shared fixtures: a fresh store per test (SQLite, or a temporary PostgreSQL database), settings
without a config file.

A module runs its store tests on both backends with
`pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)`; everything else gets
SQLite. PostgreSQL is the machine's (`.ci/run` starts it); if it does not answer, the test fails.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tracing_eval.config import Settings, load_settings
from tracing_eval.store.sql import SqlStore

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
EXAMPLES = REPO / "examples"

#: Modules whose tests run the sidecar as a process, or the CLI against loopback servers, end to end
#: (marker `e2e`), and modules whose tests take many seconds each (marker `slow`). `make check` leaves
#: both out; `make test` (CI) runs everything. A test may also carry either marker itself.
E2E_MODULES = {
    "test_sidecar.py",
    "test_operations_http.py",
    "test_security.py",
    "test_shutdown.py",
    "test_sinks_cli.py",
    "test_chaos.py",
    "test_postgres_cli.py",
    "test_ci_loop.py",
    "test_extending.py",
    "langfuse/test_e2e.py",
    "langfuse/test_cli_wiring.py",
}
SLOW_MODULES = {
    "test_months.py",
    "test_bad_input.py",
    "test_examples.py",
    "test_fuzz.py",
    "test_packaging.py",
    "test_postgres.py",
    "test_slow_and_large.py",
    "test_history.py",
    "conventions/test_convention_precedence.py",
    "conformance/test_corpus.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of E2E_MODULES `e2e` and those of SLOW_MODULES `slow`."""
    for item in items:
        module = item.path.relative_to(REPO / "tests").as_posix()
        if module in E2E_MODULES:
            item.add_marker(pytest.mark.e2e)
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


BACKENDS = ["sqlite", "postgresql"]
#: Where the test databases are created (one per test, dropped afterwards).
PG_URL = os.environ.get("PG_TEST_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def _admin(sql: str) -> None:
    """Run one statement on the admin database, on a thread of its own (callable from any test)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _admin_async(sql)).result()


async def _admin_async(sql: str) -> None:
    import asyncpg

    url = make_url(PG_URL)
    conn = await asyncpg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        database=url.database,
        timeout=10,
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test; yields its SQLAlchemy URL and drops it afterwards."""
    name = f"tracing_eval_test_{uuid.uuid4().hex[:16]}"
    try:
        _admin(f'CREATE DATABASE "{name}"')
        problem = None
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:  # a missing PostgreSQL fails the test: these tests never skip
        pytest.fail(
            f"PostgreSQL at {make_url(PG_URL).render_as_string(hide_password=True)} is not usable ({problem}); "
            "start it (.ci/run does) or point PG_TEST_URL at one",
            pytrace=False,
        )
    try:
        yield make_url(PG_URL).set(drivername="postgresql+asyncpg", database=name).render_as_string(hide_password=False)
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend under test: SQLite unless a module parametrizes it."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    elif backend == "postgresql":
        with pg_database() as url:
            yield url
    else:
        raise ValueError(f"unknown store backend {backend!r}")


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_url: str) -> Settings:
    monkeypatch.chdir(tmp_path)  # no stray ./tracing-eval.toml, store file lands in tmp
    return load_settings(None, store={"url": store_url})


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[SqlStore]:
    s = SqlStore(settings.store.url)
    await s.open()
    yield s
    await s.close()
