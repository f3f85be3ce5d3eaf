"""What the benchmark judge answers: a plausible, valid JSON answer for whatever a client asks.

Two kinds of request arrive:

- **with a JSON schema** (`response_format: {"type": "json_schema", ...}`: tracing-eval, and DeepEval with
  an OpenAI model that supports structured outputs). The answer is a small valid instance of the schema:
  the first enum value, one element per array, one entry per free-form object, a fixed reason sentence
  for reason-like strings and "ok" for other strings, 5 for numbers (clamped to the schema's bounds),
  and message numbers that exist in the transcript for message-number fields.
- **plain prompts** that describe the JSON they want in words (eval_lib, DeepEval's G-Eval scoring
  call). These are matched on key phrases of the peers' own templates (read from their installed
  sources) and answered in the shape each template asks for.

Every answer also gets a `kind`, a short label of what was asked (the schema name, or the matched
template), so the benchmark can break calls and tokens down per metric step.

Pure functions, no I/O: `answer(request) -> (content, kind)`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

Json = dict[str, Any]

REASON = "The assistant handled this part of the conversation as the instructions require."
SHORT = "The user asked the assistant to complete a request."
NUMBER = 5

_REASON_KEYS = ("reason", "summary", "explanation", "rationale", "comment")
#: Integer fields that point at a message of the transcript (`[n] role (turn k): ...`).
_MESSAGE_KEYS = ("message", "turn", "position")
_POINTER_KEYS = ("index", "message", "turn", "position")
_POSITION = re.compile(r"^\[(\d+)\] (user|assistant|tool)\b", re.MULTILINE)


def request_text(request: Mapping[str, Any]) -> str:
    """Every message's text, joined (string content or text parts)."""
    out = []
    for m in request.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(str(content or ""))
    return "\n".join(out)


def json_schema_of(request: Mapping[str, Any]) -> tuple[str, Json] | None:
    """`(name, schema)` of a `response_format` of type json_schema, else None."""
    fmt = request.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema")
        if isinstance(schema, dict):
            return str(spec.get("name") or "schema"), schema
    return None


class _Context:
    """Facts of the request that make some values valid: message numbers seen in the transcript."""

    def __init__(self, text: str) -> None:
        found = [(int(n), role) for n, role in _POSITION.findall(text)]
        self.assistant = [n for n, role in found if role == "assistant"]
        self.user = [n for n, role in found if role == "user"]

    def message_number(self, key: str) -> int:
        """A user message for fields about the user or a fact (the first), else the last assistant reply."""
        if ("user" in key or "fact" in key) and self.user:
            return self.user[0]
        if self.assistant:
            return self.assistant[-1]
        return self.user[0] if self.user else 1


def _resolve(schema: Any, root: Json) -> Json:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema if isinstance(schema, dict) else {}


def _clamp(value: float, schema: Json) -> float:
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    return value


def _array_length(items: Json, schema: Json, root: Json) -> int:
    """One element, except for arrays of flags that point at one message each (`index`, `message`, ...):
    an empty list (nothing flagged) is a plausible answer and cannot point at the wrong message."""
    props = _resolve(items, root).get("properties") or {}
    pointers = [k for k, v in props.items() if k in _POINTER_KEYS and _resolve(v, root).get("type") == "integer"]
    n = 0 if pointers else 1
    n = max(n, int(schema.get("minItems", 0)))
    if "maxItems" in schema:
        n = min(n, int(schema["maxItems"]))
    return n


def instance(schema: Any, root: Json, ctx: _Context, key: str = "") -> Any:
    """A small valid instance of a JSON schema (the subset OpenAI structured outputs use)."""
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            options = [_resolve(o, root) for o in schema[combinator]]
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return instance(chosen, root, ctx, key)
    if "allOf" in schema:
        merged: Json = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        return instance(merged, root, ctx, key)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        if props:
            return {k: instance(v, root, ctx, k) for k, v in props.items()}
        extra = schema.get("additionalProperties")
        return {"fact": instance(extra, root, ctx, "fact")} if isinstance(extra, dict) else {}
    if kind == "array":
        items = schema.get("items") or {}
        return [instance(items, root, ctx, key) for _ in range(_array_length(items, schema, root))]
    if kind == "string":
        return REASON if any(k in key.lower() for k in _REASON_KEYS) else SHORT
    if kind == "integer":
        if any(k in key.lower() for k in _MESSAGE_KEYS):
            return ctx.message_number(key.lower())
        return int(_clamp(NUMBER, schema))
    if kind == "number":
        return _clamp(NUMBER, schema)
    if kind == "boolean":
        return True
    return None


def schema_answer(request: Mapping[str, Any]) -> tuple[str, str] | None:
    found = json_schema_of(request)
    if found is None:
        return None
    name, schema = found
    value = instance(schema, schema, _Context(request_text(request)))
    return json.dumps(value), f"schema:{name}"


# --- plain prompts (eval_lib 0.8.2 agent metrics, DeepEval's G-Eval scoring call) ---------------------

_VERDICT_OPTIONS = re.compile(r'"verdict"\s*:\s*"([a-z_]+(?:\|[a-z_]+)+)"')
_CRITERIA = re.compile(r"SUCCESS CRITERIA \(as JSON array\):\n(\[.*?\])\n", re.DOTALL)


def _first_verdict(text: str) -> str:
    found = _VERDICT_OPTIONS.findall(text)
    return found[-1].split("|")[0] if found else "yes"


_TOPICS = (
    ("repetition", ("repetitive patterns",)),
    ("failure", ("failure modes", "uncertainty")),
    ("flow", ("conversational flow",)),
    ("knowledge_retention", ("knowledge retention",)),
    ("role_adherence", ("role adherence", "stayed in character")),
    ("task_success", ("task success", "primary goal", "user goal")),
)


def _topic(text: str) -> str:
    """Which metric a plain prompt belongs to, from the words its template opens with."""
    head = text[:300].lower()
    return next((name for name, words in _TOPICS if any(w in head for w in words)), "")


def _shape_answer(text: str) -> tuple[str, str]:
    if "Return only a JSON array of strings" in text:  # eval_lib TaskSuccessRate: success criteria
        return json.dumps(["The assistant completed the request the user made."]), "criteria"
    if "exactly the same length and order" in text:  # eval_lib TaskSuccessRate: one verdict per criterion
        match = _CRITERIA.search(text)
        try:
            count = len(json.loads(match.group(1))) if match else 1
        except ValueError:
            count = 1
        verdicts = [{"verdict": _first_verdict(text), "reason": REASON} for _ in range(count)]
        return json.dumps(verdicts), "criteria_verdicts"
    if '"verdict"' in text and "JSON array" in text:  # eval_lib KnowledgeRetention, RoleAdherence
        return json.dumps([{"verdict": _first_verdict(text), "reason": REASON}]), "verdict_array"
    if '"verdict"' in text:  # eval_lib RepetitivePattern, FailureRate, ConversationalFlow
        return json.dumps({"verdict": _first_verdict(text), "reason": REASON}), "verdict_object"
    if '`"score"`' in text and '`"reason"`' in text:  # DeepEval (Conversational)G-Eval scoring, raw
        return json.dumps({"reason": REASON, "score": NUMBER}), "score_reason"
    tail = text.rstrip()[-40:]
    if tail.endswith("User goal:"):
        return "The user wants the assistant to carry out the request they describe.", "goal"
    if tail.endswith("Summary:"):
        return REASON, "summary"
    return REASON, "other"


def prompt_answer(text: str) -> tuple[str, str]:
    """Answer a prompt that asks for JSON in words; the kind is `text:<shape>[:<metric>]`."""
    content, shape = _shape_answer(text)
    topic = _topic(text)
    return content, f"text:{shape}:{topic}" if topic else f"text:{shape}"


def answer(request: Mapping[str, Any]) -> tuple[str, str]:
    """The answer text for a chat-completion request and the kind of question it was."""
    return schema_answer(request) or prompt_answer(request_text(request))
