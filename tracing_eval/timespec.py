"""Points in time as people write them on the command line and in settings: `24h`, `7d`, ISO 8601."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(value: str | datetime | timedelta, now: datetime | None = None) -> datetime:
    """A start time from a duration back from now (`90m`, `24h`, `7d`, `2w`) or an ISO 8601 time."""
    now = now or datetime.now(UTC)
    if isinstance(value, timedelta):
        return now - value
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    found = _DURATION.match(value)
    if found:
        return now - timedelta(seconds=float(found[1]) * _UNITS[found[2]])
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected a duration like 24h / 7d or an ISO 8601 time, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
