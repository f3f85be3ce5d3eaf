"""Fixtures of the Langfuse tests: the fake server in each generation and a started worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support.fakes.langfuse_server import FakeLangfuseServer
from tests.support.langfuse_harness import Worker, lf_settings
from tracing_eval.config import Settings


@pytest.fixture(params=["v4", "v3"])
def server(request: pytest.FixtureRequest) -> Iterator[FakeLangfuseServer]:
    with FakeLangfuseServer(request.param) as lf:
        yield lf


@pytest.fixture
async def worker(settings: Settings, server: FakeLangfuseServer) -> AsyncIterator[Worker]:
    w = await Worker(settings, server, lf_settings(server)).start()
    yield w
    await w.stop()
