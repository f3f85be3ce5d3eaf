"""Small text helpers shared by conventions and deterministic metrics."""

from __future__ import annotations

import re

import orjson

_ERROR_PREFIX = re.compile(r"^\s*(error|exception|traceback|failed|failure)\b", re.I)
_ERROR_WORDS = re.compile(r"\b(not found|does not exist|invalid|unauthori[sz]ed|forbidden|timed? ?out)\b", re.I)


def looks_like_tool_error(result: object) -> bool:
    """True when a tool result reads as a failure: `Error: ...`, or JSON with an `error` key."""
    if result is None:
        return False
    if isinstance(result, dict):
        return bool(result.get("error") or result.get("errors")) or result.get("status") in ("error", "failed")
    text = str(result).strip()
    if not text:
        return False
    if text[0] in "{[":
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return looks_like_tool_error(parsed)
    return bool(_ERROR_PREFIX.match(text)) or (len(text) < 200 and bool(_ERROR_WORDS.search(text)))
