"""structlog setup: JSON for machines or console for people, to stderr, secrets redacted."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict

# Keys that name a secret ("auth_token", "api_key", ...), not counts such as "judge_tokens".
_SECRET_KEY = re.compile(r"secret|password|passwd|api_?key|authorization|credential|auth_?token|^token$", re.I)


# Credentials inside URLs: scheme://user:password@host -> scheme://[redacted]@host. A scheme is read
# from the start of its run of [a-z0-9+.-] (what precedes its first letter stays in group 1), without
# giving back: retried from every letter of a long run, it would cost the run's square.
_URL_CREDENTIALS = re.compile(r"(?<![a-z0-9+.-])([0-9+.-]*+[a-z][a-z0-9+.-]*+://)[^/\s:@'\"]+:[^/\s@'\"]+@", re.I)


def redact_url_credentials(text: str) -> str:
    """`scheme://user:password@host` -> `scheme://[redacted]@host` (for text that is stored or logged)."""
    return _URL_CREDENTIALS.sub(r"\1[redacted]@", text) if "@" in text else text


def redact_secrets(_logger: Any, _method: str, event: EventDict) -> EventDict:
    """Blank out values of keys that name a secret, and credentials in URLs anywhere in the text
    (messages, errors and formatted tracebacks, which carry no local variables)."""
    for key, value in list(event.items()):
        if key != "event" and _SECRET_KEY.search(key):
            event[key] = "[redacted]"
        elif isinstance(value, str):
            event[key] = redact_url_credentials(value)
    return event


#: Libraries whose routine messages are not news: a skipped overlapping tick is by design.
_QUIET = {"apscheduler": logging.ERROR}


class _StdlibHandler(logging.StreamHandler[TextIO]):
    """Marks the handler `configure` installs on the root logger, so a second call replaces it."""


def configure(level: str = "info", fmt: str = "console") -> None:
    """Log through structlog to stderr; libraries that use `logging` (uvicorn, OpenTelemetry, httpx)
    come out in the same format, redacted the same way, at warning and above."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # plain text, before redaction
        redact_secrets,
    ]
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    handler = _StdlibHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name],
            processors=[*shared, structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StdlibHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    for name, quiet in _QUIET.items():
        logging.getLogger(name).setLevel(quiet)
