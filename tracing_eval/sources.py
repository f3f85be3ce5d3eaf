"""The source protocol: something the scheduler pulls spans from on each tick."""

from __future__ import annotations

from typing import Protocol

from tracing_eval.store.base import Store


class Source(Protocol):
    @property
    def name(self) -> str:
        """A stable name for logs and metrics; read-only, so a source may compute it (`otlp-file:PATH`)."""
        ...

    async def pull(self, store: Store, now: float) -> int:
        """Ingest whatever is new since the last pull; return the number of spans stored."""
        ...
