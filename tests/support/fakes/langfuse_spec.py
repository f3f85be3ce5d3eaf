"""OpenAPI validation of Langfuse requests and responses, per server generation.

Loads the unmodified spec copies from `../shared/reference/` (v4 → `langfuse-openapi-v4.16.yml`,
v3 → `langfuse-openapi-v3.225.yml`) and validates with `openapi-core` (request: path, query,
headers incl. Basic auth, body; response: status code and body). The in-memory copy is adjusted
where the generated spec is looser or stricter than the server it describes:

- create/update bodies get `additionalProperties: false` (the server's zod schemas are strict);
- `{$ref: X, nullable: true}` properties accept null (Fern means "nullish"; OAS 3.0 would ignore
  the `nullable` sibling of a `$ref`);
- the `/ingestion` body's `batch` items are checked one event at a time (`check_event`), because
  the server answers bad events with a per-event 400 inside a 207, not with a 400 for the batch;
- optionally (`score_batches=True`, v4 only) `POST /scores` takes a list of scores with
  `timestamp` and answers 202/207, as servers >= v4.59 and SDK 5.x do (not in the v4.16 file; the
  shapes follow the SDK 5.0.4 types `CreateScoreRequest`, `CreateScoreBatchResponse`/`Results`).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from openapi_core import OpenAPI
from openapi_core.configurations import Config
from openapi_core.testing import MockRequest
from openapi_schema_validator import OAS30Validator, oas30_format_checker

Generation = Literal["v4", "v3"]

REFERENCE_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "reference"
SPEC_FILES: dict[str, str] = {"v4": "langfuse-openapi-v4.16.yml", "v3": "langfuse-openapi-v3.225.yml"}

# Request bodies the server parses with strict schemas: unknown fields are a 400.
STRICT_BODIES = (
    "CreateScoreRequest",
    "legacyCreateScoreRequest",
    "ScoreBody",
    "CreateScoreConfigRequest",
    "UpdateScoreConfigRequest",
    "CreateAnnotationQueueRequest",
    "CreateAnnotationQueueItemRequest",
    "UpdateAnnotationQueueItemRequest",
    "CreateCommentRequest",
)

_HOST = "http://langfuse.fake"


@functools.cache
def _raw_spec(generation: Generation) -> dict[str, Any]:
    path = REFERENCE_DIR / SPEC_FILES[generation]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as f:
        return yaml.load(f, Loader=loader)


def _nullable_refs(node: Any) -> Any:
    """Rewrite `{$ref, nullable: true}` as `anyOf[$ref, null]` everywhere (in place)."""
    if isinstance(node, dict):
        for key, value in list(node.items()):
            node[key] = _nullable_refs(value)
        if "$ref" in node and node.get("nullable") is True:
            extra = {k: v for k, v in node.items() if k not in ("$ref", "nullable")}
            return {**extra, "anyOf": [{"$ref": node["$ref"]}, {"nullable": True, "enum": [None]}]}
    elif isinstance(node, list):
        return [_nullable_refs(v) for v in node]
    return node


@functools.cache
def build_spec(generation: Generation, *, score_batches: bool = False) -> dict[str, Any]:
    """A patched deep copy of the generation's spec (see the module docstring); cached, read-only."""
    spec = copy.deepcopy(_raw_spec(generation))
    schemas = spec["components"]["schemas"]
    for name in STRICT_BODIES:
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    ingestion = spec["paths"]["/api/public/ingestion"]["post"]
    ingestion["requestBody"]["content"]["application/json"]["schema"]["properties"]["batch"]["items"] = {
        "type": "object"
    }
    if score_batches:
        if generation != "v4":
            raise ValueError("score_batches emulates a v4 server (>= v4.59)")
        item = copy.deepcopy(schemas["CreateScoreRequest"])
        item["title"] = "CreateScoreRequestWithTimestamp"
        item["properties"]["timestamp"] = {"type": "string", "format": "date-time", "nullable": True}
        schemas["CreateScoreRequestWithTimestamp"] = item
        op = spec["paths"]["/api/public/scores"]["post"]
        # Items are checked one by one (a bad item is rejected inside a 207, not the whole batch).
        op["requestBody"]["content"]["application/json"]["schema"] = {"type": "array", "items": {"type": "object"}}
        op["responses"].pop("200", None)
        op["responses"]["202"] = _json_response(
            {
                "type": "object",
                "properties": {"message": {"type": "string", "enum": ["Accepted"]}},
                "required": ["message"],
            }
        )
        op["responses"]["207"] = _json_response(
            {
                "type": "object",
                "properties": {
                    "accepted": {"type": "integer"},
                    "rejected": {"type": "integer"},
                    "errors": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"message": {"type": "string"}},
                            "required": ["message"],
                        },
                    },
                },
                "required": ["accepted", "rejected", "errors"],
            }
        )
    return _nullable_refs(spec)


def _json_response(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "", "content": {"application/json": {"schema": schema}}}


def _schema_messages(errors: Iterable[Any], limit: int = 6) -> list[str]:
    """`path: message` lines from jsonschema errors, descending into anyOf/oneOf branches."""
    out: list[str] = []
    for e in errors:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        sub = [c for c in (e.context or []) if c.validator not in ("anyOf", "oneOf")]
        if sub and e.validator in ("anyOf", "oneOf"):
            best = sorted(sub, key=lambda c: -len(c.absolute_path))[:2]
            out += [f"{'/'.join(str(p) for p in c.absolute_path) or where}: {c.message}" for c in best]
        else:
            out.append(f"{where}: {e.message}")
    seen: list[str] = []
    for line in out:
        # The null branch of a rewritten nullable $ref only adds noise to the message.
        if line not in seen and not line.endswith("is not one of [None]") and "None for not nullable" not in line:
            seen.append(line)
    return seen[:limit]


def explain(exc: BaseException) -> str:
    """A readable one-line reason for an openapi-core validation error (walks its causes)."""
    parts: list[str] = []
    cur: BaseException | None = exc
    while cur is not None:
        schema_errors = getattr(cur, "schema_errors", None)
        if schema_errors:
            parts += _schema_messages(schema_errors)
        else:
            # "Request body validation error: Value [...] not valid for ..." -> keep the lead only
            text = re.split(r":? Value ", str(cur) or type(cur).__name__)[0]
            if text not in parts:
                parts.append(text)
        cur = cur.__cause__ or cur.__context__
    return "; ".join(parts)


@functools.cache
def spec_checker(generation: Generation, *, score_batches: bool = False) -> SpecChecker:
    """A shared (cached) checker per generation: building one takes about half a second."""
    return SpecChecker(generation, score_batches=score_batches)


class SpecChecker:
    """Validates raw HTTP exchanges against one generation's (patched) spec."""

    def __init__(self, generation: Generation, *, score_batches: bool = False) -> None:
        self.generation = generation
        self.spec = build_spec(generation, score_batches=score_batches)
        self.api = OpenAPI.from_dict(self.spec, config=Config(spec_validator_cls=None))
        self._validators: dict[str, OAS30Validator] = {}

    def has_operation(self, method: str, path_template: str) -> bool:
        return method.lower() in self.spec["paths"].get(path_template, {})

    def _request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        body: bytes,
        content_type: str | None,
    ) -> MockRequest:
        return MockRequest(
            _HOST,
            method,
            path,
            args=list(query),  # type: ignore[arg-type]  # a multi-dict accepts pairs
            headers=dict(headers),
            data=body,
            content_type=content_type or "",
        )

    def check_request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        body: bytes,
        content_type: str | None,
    ) -> list[str]:
        """Problems with the request (empty when it conforms)."""
        req = self._request(method, path, query, headers, body, content_type)
        result = self.api.unmarshal_request(req)
        return [explain(e) for e in result.errors]

    def check_response(self, method: str, template: str, status: int, payload: Any) -> list[str]:
        """Problems with a JSON response for the operation `method template` (status declared?).

        Uses jsonschema directly (with OAS 3.0 formats) rather than openapi-core's unmarshaller:
        same rules, ~30x faster on 1000-row pages.
        """
        op = self.spec["paths"].get(template, {}).get(method.lower())
        if op is None:
            return [f"operation {method} {template} is not in the spec"]
        declared = op.get("responses", {})
        response = declared.get(str(status)) or declared.get("default")
        if response is None:
            return [f"status {status} is not declared for {method} {template} (declared: {sorted(declared)})"]
        content = response.get("content")
        if not content:
            return [] if payload is None else [f"status {status} of {method} {template} declares no body"]
        schema = (content.get("application/json") or {}).get("schema")
        return self.check_schema(schema, payload) if schema else []

    def check_schema(self, schema: str | dict[str, Any], instance: Any) -> list[str]:
        """Problems of `instance` against a component (by name) or an inline schema."""
        key = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            target = {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
            # The whole spec is the root document, so "#/components/..." references resolve.
            validator = OAS30Validator({**self.spec, **target}, format_checker=oas30_format_checker)
            self._validators[key] = validator
        return _schema_messages(validator.iter_errors(instance))

    def event_schema(self, event_type: str) -> dict[str, Any] | None:
        """The `IngestionEvent` branch for an event `type`, or None if the type is unknown."""
        for branch in self.spec["components"]["schemas"]["IngestionEvent"]["oneOf"]:
            enum = branch["allOf"][0]["properties"]["type"]["enum"]
            if event_type in enum:
                return branch
        return None

    def check_event(self, event: Any) -> list[str]:
        """Problems of one `/ingestion` batch event (validated against its own branch)."""
        if not isinstance(event, dict):
            return ["(event): not an object"]
        branch = self.event_schema(str(event.get("type")))
        if branch is None:
            return [f"type: {event.get('type')!r} is not a known ingestion event type"]
        return self.check_schema(branch, event)
