"""A judge handler for the fake OpenAI server that answers any JSON-schema request validly.

It builds the smallest instance of the requested schema (first enum value, one item for arrays
of objects or strings, `ok` for strings, the minimum for numbers), so every judged metric can
run end to end. Message numbers must exist in the thread: an integer field named like
`*message*` gets the first user message number of the transcript, and lists of per-message
findings stay empty. `broken` names metrics (by schema name) that get a non-JSON answer instead;
in a batched request (`thread_metrics`, one property per metric) their part is a sentence instead
of an object, and the other parts stay valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tests.support.fakes.openai_server import Reply

_USER_MESSAGE = re.compile(r"^\[(\d+)\] user", re.M)


def _about_messages(items: Mapping[str, Any]) -> bool:
    return any("message" in k and v.get("type") == "integer" for k, v in items.get("properties", {}).items())


def instance(schema: Mapping[str, Any], first_user: int = 0, name: str = "") -> Any:
    """A minimal value that validates against `schema`."""
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return instance(schema["anyOf"][0], first_user, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: instance(v, first_user, k) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        items = schema.get("items", {})
        wanted = items.get("type") in ("object", "string") and not _about_messages(items)
        count = max(1, int(schema.get("minItems", 1))) if wanted else 0
        return [instance(items, first_user) for _ in range(count)]
    if kind == "string":
        return "ok"
    if kind in ("integer", "number"):
        return first_user if "message" in name else schema.get("minimum", 0)
    if kind == "boolean":
        return True
    return None


class SchemaJudge:
    """`(request) -> Reply` for `FakeOpenAIServer`: valid answers, or garbage for `broken` metrics."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.broken = broken

    def __call__(self, request: dict[str, Any]) -> Reply:
        fmt = request.get("response_format") or {}
        spec = fmt.get("json_schema") or {}
        if spec.get("name") in self.broken:
            return Reply("I think the conversation went fine overall.")
        transcript = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
        found = _USER_MESSAGE.search(transcript)
        first_user = int(found.group(1)) if found else 0
        answer = instance(spec.get("schema") or {"type": "object"}, first_user)
        if spec.get("name") == "thread_metrics":
            answer.update({k: "I think the conversation went fine overall." for k in answer if k in self.broken})
        return Reply(json.dumps(answer))
