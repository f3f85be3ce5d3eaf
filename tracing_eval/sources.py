"""The source protocol: where spans come from, pulled on each tick or received as they arrive.

The worker treats every source alike: it serves the HTTP routes a source has (the OTLP receiver's
`/v1/traces`; a pulled source has none), starts each before the first tick, pulls each on every
tick, stops each within the drain time, and closes each at the end. `PullSource` gives a pulled
source those parts that do nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, runtime_checkable

from starlette.routing import BaseRoute

from tracing_eval.store.base import IngestBatch, IngestStats


class SourceStore(Protocol):
    """What a pulled source may do with the store: read its saved progress and ingest a batch (which
    saves the batch's progress with its spans, in one transaction)."""

    async def get_source_state(self, name: str) -> str | None: ...

    async def ingest(self, batch: IngestBatch, now: float) -> IngestStats: ...


class Source(Protocol):
    @property
    def name(self) -> str:
        """A stable name for logs and metrics; read-only, so a source may compute it (`otlp-file:PATH`)."""
        ...

    async def pull(self, store: SourceStore, now: float) -> int:
        """Ingest whatever is new since the last pull; return the number of spans stored (a source that
        receives stores as data arrives, and finds nothing to pull)."""
        ...

    def routes(self) -> list[BaseRoute]:
        """HTTP routes served on the worker's HTTP server while `run` serves (none for a pulled source)."""
        ...

    async def start(self) -> None:
        """Before the first tick of `run`: open what the source listens on (raise `ConfigError` when it cannot)."""
        ...

    async def stop(self, drain_seconds: float) -> None:
        """On shutdown, beside the last tick: stop taking data; work in progress gets `drain_seconds`."""
        ...

    async def aclose(self) -> None:
        """Let go of connections and threads; called once the worker is done (also after `run --once`)."""
        ...


class PullSource:
    """Base of a source that is only pulled: no routes, nothing to start, stop or close. A subclass
    gives `name` and `pull` (and `aclose` when it holds a connection)."""

    def routes(self) -> list[BaseRoute]:
        return []

    async def start(self) -> None:
        return None

    async def stop(self, drain_seconds: float) -> None:
        return None

    async def aclose(self) -> None:
        return None


@runtime_checkable
class CatchingUp(Protocol):
    """A source with a history to read up to now (`backfill`), reporting how far it got."""

    @property
    def name(self) -> str: ...

    async def catch_up(self, store: SourceStore, progress: Callable[[datetime | None, int], None]) -> int:
        """Pull until what is read reaches the time of the pull; after each pull call `progress` with the
        time read up to (None: nothing yet) and the spans stored so far; return the spans stored."""
        ...
