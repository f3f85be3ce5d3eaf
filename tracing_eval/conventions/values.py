"""Reading attribute values defensively: JSON strings, text, numbers and flattened indexes.

Attribute content comes from arbitrary instrumentations; nothing here raises on odd input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import orjson


def loads(value: Any) -> Any:
    """Decode a JSON string; other values pass through; undecodable text gives None."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def maybe_json(value: Any) -> Any:
    """Decode a string holding a JSON object, array or string; anything else is returned as is."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "[", '"'):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def dumps(value: Any) -> str:
    """Compact JSON text for any value (unknown types as their `str`)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


def as_str(value: Any) -> str | None:
    """A non-empty identifier-like string (ints allowed), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def as_int(value: Any) -> int | None:
    """An integer count from an int, a whole float or a numeric string, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if math.isfinite(number) else None
    return None


def text(value: Any) -> str:
    """Readable text of a content value: a string, a list of content parts, or anything as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = [_part_text(p) for p in value]
        return "\n".join(p for p in pieces if p)
    if isinstance(value, dict):
        for key in ("text", "content"):
            if isinstance(value.get(key), (str, list)):
                return text(value[key])
    return dumps(value)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        for key in ("text", "content"):
            if isinstance(part.get(key), str):
                return part[key]
    return ""


def _is_part(value: Any) -> bool:
    """A content part: typed (`{"type": ...}`) or a bare text block (`{"text": ...}`, Bedrock Converse)."""
    return isinstance(value, dict) and ("type" in value or set(value) == {"text"})


def content_text(value: Any) -> str:
    """Like `text`, but also unpacks a JSON-encoded list of content parts (`[{"type": "text", ...}]`,
    `[{"text": ...}]`)."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        parts = loads(value)
        if isinstance(parts, list) and parts and all(_is_part(p) for p in parts):
            return text(parts)
    return text(value)


def result_text(value: Any) -> str:
    """A tool result as text: strings unchanged, a list of text blocks (`[{"text": ...}]`, MCP's
    `[{"type": "text", "text": ...}]`) as its text, other structures as JSON."""
    if value is None:
        return ""
    value = unwrap_text_blocks(value)
    return value if isinstance(value, str) else dumps(value)


def unwrap_text_blocks(value: Any) -> Any:
    """A list of text blocks as its text; any other value unchanged."""
    if isinstance(value, list) and value and all(_is_text_block(b) for b in value):
        return "\n".join(b["text"] for b in value)
    return value


def _is_text_block(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("text"), str)
        and (set(value) == {"text"} or (value.get("type") == "text" and set(value) <= {"type", "text"}))
    )


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Group flattened `<prefix>N.<rest>` attributes by N, in index order: `[{rest: value}, ...]`
    (read only: they may be shared). Attributes read back from the store keep their flattened
    histories grouped (`history.Joined`): those groups are taken as they are, and another prefix is
    looked for among the other keys only."""
    groups_of = getattr(attrs, "groups", None)
    names: Iterable[Any] = attrs
    if groups_of is not None and len(attrs) == getattr(attrs, "size", -1):
        if prefix in groups_of:
            stored = groups_of[prefix]
            if any("" in fields for fields in stored):  # `<prefix>N.` names no field
                return [{rest: value for rest, value in fields.items() if rest} for fields in stored]
            return stored
        if not any(group.startswith(prefix) or prefix.startswith(group) for group in groups_of):
            names = attrs.plain  # type: ignore[attr-defined]  # the keys no flattened history put there
    size = len(prefix)
    try:  # a slice compare is cheaper than `startswith` through a call per key
        keys = [key for key in names if key[:size] == prefix]
    except TypeError:  # a key that cannot be sliced
        keys = [k for k in attrs if isinstance(k, str) and k.startswith(prefix)]
    if not keys:
        return []
    groups: dict[int, dict[str, Any]] = {}
    for key in keys:
        index, _, rest = key[size:].partition(".")
        if rest and index.isascii() and index.isdigit() and len(index) < 10:  # int() refuses 4300+ digits
            groups.setdefault(int(index), {})[rest] = attrs[key]
    return [groups[i] for i in sorted(groups)]


def stored_items(attrs: Mapping[str, Any], key: str) -> list[Any] | None:
    """The items the JSON list text at `key` decodes to, when the store can give them from the
    messages of its thread it decoded already (`history.Joined`; read only: they may be shared),
    else None."""
    found = getattr(attrs, "parsed", None)
    found = found.get(key) if found else None
    return found[1]() if found is not None and attrs.get(key) is found[0] else None


def has_prefix(attrs: Mapping[str, Any], prefix: str) -> bool:
    return any(isinstance(k, str) and k.startswith(prefix) for k in attrs)
