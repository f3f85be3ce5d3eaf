"""structlog setup: JSON for machines or console for people, to stderr, secrets redacted."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

_SECRET_KEY = re.compile(r"(secret|token|password|api_?key|authorization)", re.I)


def redact_secrets(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Blank out values of keys that name a secret, wherever they are bound."""
    for key in list(event):
        if key != "event" and _SECRET_KEY.search(key):
            event[key] = "[redacted]"
    return event


def configure(level: str = "info", fmt: str = "console") -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            structlog.processors.format_exc_info if fmt == "json" else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
