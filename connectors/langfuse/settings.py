"""Settings of the Langfuse connector (source, score sink and review queue).

The `[langfuse]` section of the settings (env `TRACING_EVAL_LANGFUSE__<KEY>`), registered with the
Langfuse source and sink (`tracing_eval.connectors.langfuse.plugin`); the keys and host also come from the Langfuse SDK's own
variables (`LANGFUSE_PUBLIC_KEY`, `LANGFUSE_SECRET_KEY`, `LANGFUSE_BASE_URL` or `LANGFUSE_HOST`).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from tracing_eval.timespec import parse_since

__all__ = ["CLOUD_URL", "SELF_MARKER", "LangfuseSettings", "parse_since"]

CLOUD_URL = "https://cloud.langfuse.com"
#: Tag (and trace-name prefix, and metadata key `tracing_eval`) that marks the worker's own judge traffic.
SELF_MARKER = "tracing-eval"


class LangfuseSettings(BaseModel):
    """Where Langfuse is, what to read from it, and how to write scores and review items back."""

    model_config = ConfigDict(extra="forbid")

    # -- connection ------------------------------------------------------------------------
    base_url: str | None = Field(
        None, description="Langfuse URL; default: LANGFUSE_BASE_URL, else LANGFUSE_HOST, else Langfuse Cloud (EU)."
    )
    public_key: str | None = Field(None, description="Project public key (pk-lf-...); default: LANGFUSE_PUBLIC_KEY.")
    secret_key: SecretStr | None = Field(
        None, description="Project secret key (sk-lf-...); default: LANGFUSE_SECRET_KEY. Set it from the environment."
    )
    generation: Literal["auto", "v4", "v3"] = Field(
        "auto", description="Read API: `auto` probes /v2/observations (200: v4, 404: v3 /traces + /sessions)."
    )
    timeout_seconds: float = Field(30.0, gt=0, description="Timeout of one HTTP request.")
    max_retries: int = Field(4, ge=0, description="Retries of one request on 429, 5xx and network errors.")
    retry_backoff_seconds: float = Field(
        0.5, gt=0, description="First retry delay without Retry-After; doubles per retry (jittered)."
    )
    max_retry_wait_seconds: float = Field(
        60.0, gt=0, description="Longest Retry-After honoured in place; longer waits fail the call (retried later)."
    )

    # -- reading ---------------------------------------------------------------------------
    environments: list[str] = Field(default_factory=list, description="Only traces of these environments (all: []).")
    tags: list[str] = Field(default_factory=list, description="Only traces that carry all of these tags.")
    trace_names: list[str] = Field(default_factory=list, description="Only traces with one of these names (all: []).")
    sample_rate: float = Field(
        1.0, ge=0, le=1, description="Share of sessions read; by a hash of the session id, the same on every replica."
    )
    since: str = Field(
        "24h", description="Backfill window of the first pull: a duration back from now (90m, 24h, 7d) or an ISO time."
    )
    overlap_seconds: float = Field(
        300.0, ge=0, description="Re-read this much before the watermark on every pull, for ingestion lag."
    )
    window_seconds: float = Field(
        3600.0,
        gt=0,
        description="Longest time window of one read; a backfill is read (and committed) window by window.",
    )
    max_windows_per_pull: int = Field(24, gt=0, description="Windows read per pull; a long backfill spans ticks.")
    page_size: int = Field(500, gt=0, le=1000, description="Rows per page (v4 up to 1000; v3 pages hold at most 100).")
    self_marker: str = Field(
        SELF_MARKER,
        description="Traces tagged with this, named with it as prefix, or with metadata key `tracing_eval`, are the "
        "worker's own judge traffic and are never read.",
    )

    # -- writing ---------------------------------------------------------------------------
    score_write: Literal["auto", "ingestion", "scores"] = Field(
        "auto",
        description="How scores are written: `ingestion` (score-create events, upsert on v3 and v4), `scores` "
        "(POST /scores batch with timestamp, servers >= v4.59), `auto`: ingestion, falling back to scores when the "
        "server has no /ingestion.",
    )
    review_queue: str | None = Field(
        "tracing-eval review", description="Annotation queue for failing threads (created if missing); empty: off."
    )

    @field_validator("since")
    @classmethod
    def _since(cls, v: str) -> str:
        parse_since(v)
        return v

    @field_validator("self_marker")
    @classmethod
    def _marker(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    # -- resolved values -------------------------------------------------------------------

    def resolved_base_url(self) -> str:
        """The SDK's precedence: base_url, LANGFUSE_BASE_URL, LANGFUSE_HOST, Langfuse Cloud."""
        url = self.base_url or os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST") or CLOUD_URL
        return url.rstrip("/")

    def resolved_public_key(self) -> str | None:
        return self.public_key or os.environ.get("LANGFUSE_PUBLIC_KEY") or None

    def resolved_secret_key(self) -> str | None:
        return self.secret_key.get_secret_value() if self.secret_key else os.environ.get("LANGFUSE_SECRET_KEY") or None

    @property
    def host(self) -> str:
        return urlparse(self.resolved_base_url()).netloc or self.resolved_base_url()

    @property
    def enabled(self) -> bool:
        return bool(self.resolved_public_key() and self.resolved_secret_key())

    def since_time(self, now: datetime | None = None) -> datetime:
        return parse_since(self.since, now)
