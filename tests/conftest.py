"""Shared fixtures: a fresh SQLite store per test, settings without a config file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tracing_eval.config import Settings, load_settings
from tracing_eval.store.sql import SqlStore

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
EXAMPLES = REPO / "examples"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.chdir(tmp_path)  # no stray ./tracing-eval.toml, store file lands in tmp
    return load_settings(None, store={"url": f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"})


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[SqlStore]:
    s = SqlStore(settings.store.url)
    await s.open()
    yield s
    await s.close()
