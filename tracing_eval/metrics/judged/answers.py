"""Judge answers as pydantic models: the model's JSON schema is the `response_format`, and its
validation errors are the reason of the judge's one corrective re-ask.

Fields are declared in the order the judge should write them (evidence and reason before the
verdict). Message numbers depend on the thread: `Message("replies")` is an integer that must be one
of the numbers given under that name when the schema is built and the answer read:

    class Issue(Answer):
        issue: Text
        messages: Numbers                # Annotated[list[Annotated[int, Message("numbers")]], DISTINCT]

    schema = Issue.response_schema(numbers={3, 5})        # enum [3, 5]
    parse = Issue.parser(numbers={3, 5})                  # raises MalformedAnswer naming the field

The schemas are OpenAI strict-mode objects (every property required, nothing else allowed), with
no titles or `$defs`: the judge sees what it must fill in, nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from tracing_eval.metrics.judged.base import MalformedAnswer, message_schema

#: key of the placeholder a `Message` field leaves in the generated schema, replaced by its enum
_NUMBERS_KEY = "x-message-numbers"


def _strip(value: str) -> str:
    return value.strip()


#: A string, stripped.
Text = Annotated[str, AfterValidator(_strip)]


@dataclass(frozen=True)
class OneOf:
    """A label from a fixed set; the answer's label is read stripped and in lower case."""

    labels: tuple[str, ...]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def check(value: str) -> str:
            folded = value.strip().lower()
            if folded not in self.labels:
                raise ValueError(f"must be one of {', '.join(self.labels)}; got {value!r}")
            return folded

        return core_schema.no_info_after_validator_function(check, core_schema.str_schema(strict=True))

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"type": "string", "enum": list(self.labels)}


def one_of(labels: Collection[str]) -> OneOf:
    """The `OneOf` of a scale's labels (a mapping's keys, in order)."""
    return OneOf(tuple(labels))


@dataclass(frozen=True)
class Message:
    """A message number that must be one of the numbers named `kind` (given when the schema is built
    and the answer read); a strict integer, never a string or a boolean."""

    kind: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        kind = self.kind

        def check(value: int, info: core_schema.ValidationInfo) -> int:
            valid = (info.context or {}).get(kind, ())
            if value not in valid:
                raise ValueError(f"must be one of the message numbers {sorted(valid)}; got {value}")
            return value

        return core_schema.with_info_after_validator_function(check, core_schema.int_schema(strict=True))

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {_NUMBERS_KEY: self.kind}


def _distinct_sorted(values: list[int]) -> list[int]:
    return sorted(set(values))


#: A list of message numbers, read as its distinct numbers in order: `Annotated[list[Reply], DISTINCT]`.
DISTINCT = AfterValidator(_distinct_sorted)

#: Message numbers of the common kinds: any message (`numbers`), assistant replies, user messages.
Number = Annotated[int, Message("numbers")]
Numbers = Annotated[list[Number], DISTINCT]
Reply = Annotated[int, Message("replies")]
Replies = Annotated[list[Reply], DISTINCT]
UserMessage = Annotated[int, Message("users")]


def reason_of(exc: ValidationError) -> str:
    """A validation error as one line the judge can act on: where, and what is wrong."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "the answer"
        message = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:
            parts.append(message)
        else:  # "'verdict' must be one of ...", "'reason': Input should be a valid string"
            parts.append(f"{where!r} {message}" if message.startswith("must ") else f"{where!r}: {message}")
    return "; ".join(parts)


_ORDER = ("type", "properties", "required", "additionalProperties", "items", "enum", "minimum", "maximum", "anyOf")


def _inline(node: Any, defs: Mapping[str, Any], numbers: Mapping[str, Collection[int]]) -> Any:
    """Pydantic's schema with `$ref`s inlined, titles and defaults dropped, message numbers filled in,
    and every object strict (all properties required, no others)."""
    if isinstance(node, list):
        return [_inline(x, defs, numbers) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs, numbers)
    if _NUMBERS_KEY in node:
        kind = node[_NUMBERS_KEY]
        if kind not in numbers:
            raise KeyError(f"message numbers {kind!r} not given for the answer's schema")
        return message_schema(numbers[kind])
    out = {
        k: _inline(v, defs, numbers) for k, v in node.items() if k not in ("title", "description", "$defs", "default")
    }
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return {k: out[k] for k in sorted(out, key=lambda k: _ORDER.index(k) if k in _ORDER else len(_ORDER))}


A = TypeVar("A", bound="Answer")


class Answer(BaseModel):
    """A judge answer: fields in the order the judge writes them; no other fields allowed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def response_schema(cls, **numbers: Collection[int]) -> dict[str, Any]:
        """The strict JSON schema of this answer, with the given message numbers enumerated."""
        raw = cls.model_json_schema(mode="validation")
        return dict(_inline(raw, raw.get("$defs", {}), numbers))

    @classmethod
    def parser(cls, **numbers: Collection[int]) -> Callable[[Any], Self]:
        """Read an answer (JSON data) into this model; MalformedAnswer with the reasons otherwise."""
        return partial(_validate, cls, {k: frozenset(v) for k, v in numbers.items()})


def _validate(model: type[A], context: dict[str, frozenset[int]], data: Any) -> A:
    if not isinstance(data, dict):
        raise MalformedAnswer("the answer must be a JSON object")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise MalformedAnswer(reason_of(exc)) from None
