"""Small text helpers shared by conventions and deterministic metrics."""

from __future__ import annotations

import re
import unicodedata

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


#: Unicode script names (first word of the character name) folded together for script detection.
_SCRIPT_FOLD = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "HANGUL", "FULLWIDTH": "LATIN"}


def script_of(text: str, *, min_letters: int = 12, share: float = 0.6) -> str | None:
    """The dominant Unicode script of the letters in `text` (`LATIN`, `CJK`, `CYRILLIC`, ...).

    None when there are fewer than `min_letters` letters or no script has `share` of them.
    """
    if text.isascii():
        return "LATIN" if sum(ch.isalpha() for ch in text) >= min_letters else None
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            script = name.split(" ", 1)[0] if name else "UNKNOWN"
            script = _SCRIPT_FOLD.get(script, script)
            counts[script] = counts.get(script, 0) + 1
    total = sum(counts.values())
    if total < min_letters:
        return None
    script, n = max(counts.items(), key=lambda kv: kv[1])
    return script if n / total >= share else None
