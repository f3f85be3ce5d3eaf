"""Every ScriptedJudge made in a test is closed after it (its client, then its server)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.scripted_judge import OPEN


@pytest.fixture(autouse=True)
async def close_judges() -> AsyncIterator[None]:
    yield
    while OPEN:
        await OPEN.pop().close()
