"""The configuration reference (docs/configuration.md), generated from the settings model.

    python -m tracing_eval.configdoc                                # print it
    python -m tracing_eval.configdoc --write docs/configuration.md  # what `make docs` runs
    python -m tracing_eval.configdoc --check docs/configuration.md  # exit 1 if the file is stale

Every key of `tracing_eval.config.Settings` becomes one row: TOML section and key, environment
variable, type (with its bounds), default and the field's description. The sections that registered
sources and sinks add (`[langfuse]`, `[sinks.otlp]`, ...; see `tracing_eval.registry`) are part of
that model, so they are listed too, after the engine's own. Nothing here is written
by hand except the introduction and the list of other environment variables the code reads.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from tracing_eval.config import DEFAULT_CONFIG_FILE, ENV_PREFIX, Settings

NESTED = "__"

INTRO = f"""\
# Configuration reference

<!-- Generated from tracing_eval/config.py and the sections of the registered sources and sinks
     by `make docs` (python -m tracing_eval.configdoc).
     Do not edit by hand: tests/test_configdoc.py fails when this file is stale. -->

Every setting of `tracing-eval` is listed below, section by section. A setting comes from, in
order of precedence:

1. command-line flags (`run --http` sets `[http] address`; `run --source` and `--sink` replace the
   configured sources and sinks);
2. the environment, as `{ENV_PREFIX}<SECTION>{NESTED}<KEY>` (nested sections add one more
   `{NESTED}<KEY>`), e.g. `{ENV_PREFIX}STORE{NESTED}URL` or `{ENV_PREFIX}SINKS{NESTED}OTLP{NESTED}ENDPOINT`;
3. the TOML file: `{DEFAULT_CONFIG_FILE}` in the working folder when it exists, or `--config PATH`;
4. the defaults below.

Unknown keys in the file, and unknown keys inside a known section in the environment, stop the
command with the key and the variable that set it, and so does a variable whose section does not
exist (for example `{ENV_PREFIX}JUDGE_MODEL`, one underscore). Lists and tables set from the environment are JSON, e.g.
`{ENV_PREFIX}SINKS{NESTED}ENABLED='["local", "otlp"]'`; one entry of a table can also be set on its
own, e.g. `{ENV_PREFIX}METRICS{NESTED}THRESHOLDS{NESTED}REPETITION=0.5` (the entry's name is read in
lower case). Keep secrets (API keys,
tokens) in the environment, not in the file. An annotated example file is
[config.example.toml](../config.example.toml).
"""


@dataclass(frozen=True)
class OtherVariable:
    """An environment variable outside the settings model that the code or a library reads."""

    names: tuple[str, ...]
    used_for: str
    read_by: str = "tracing-eval"  # or the library that reads it


OTHER_VARIABLES = (
    OtherVariable(("OPENAI_API_KEY",), "The judge's API key when `[judge] api_key` is not set."),
    OtherVariable(("OPENAI_BASE_URL",), "The judge's endpoint when `[judge] base_url` is not set (default: OpenAI)."),
    OtherVariable(
        ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"),
        "The Langfuse project keys when `[langfuse] public_key` / `secret_key` are not set.",
    ),
    OtherVariable(
        ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"),
        "The Langfuse URL when `[langfuse] base_url` is not set, in this order (default: Langfuse Cloud, EU).",
    ),
    OtherVariable(
        ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        "The `otlp` sink's endpoint when `[sinks.otlp] endpoint` is not set: the first as it is, the second "
        "with `/v1/logs` appended.",
    ),
    OtherVariable(
        ("OTEL_SDK_DISABLED",), "`true` makes the `otlp` sink a configuration error.", read_by="the OpenTelemetry SDK"
    ),
    OtherVariable(
        ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
        "Extra headers of the `otlp` sink (`[sinks.otlp] headers` wins on the same name).",
        read_by="the OpenTelemetry OTLP exporter",
    ),
)


@dataclass(frozen=True)
class Row:
    key: str
    env: str | None
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class Section:
    """One TOML table: `[a.b]` for a nested model, `[[a.b]]` for the items of a list of models."""

    path: tuple[str, ...]
    model: type[BaseModel]
    array: bool = False

    @property
    def header(self) -> str:
        name = ".".join(self.path)
        return f"[[{name}]]" if self.array else f"[{name}]"


# -- types and values ----------------------------------------------------------------------------


def without_none(annotation: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); anything else -> (annotation, False)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)) and len(args) == 1:
            return args[0], True
    return annotation, False


def model_of(annotation: Any) -> type[BaseModel] | None:
    inner, _ = without_none(annotation)
    return inner if inspect.isclass(inner) and issubclass(inner, BaseModel) else None


def item_model(annotation: Any) -> type[BaseModel] | None:
    """The model of `list[Model]`, else None."""
    inner, _ = without_none(annotation)
    if typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        return model_of(item)
    return None


_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path", SecretStr: "secret string"}
_PLURALS = {str: "strings", int: "integers", float: "numbers", bool: "booleans", Path: "paths"}


def type_name(annotation: Any) -> str:
    """A reader's name for a field type: `number`, `list of strings`, `one of `a`, `b``, ..."""
    inner, _ = without_none(annotation)
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        (item,) = args
        model = model_of(item)
        return "list of tables" if model else f"list of {_PLURALS.get(item, type_name(item))}"
    if origin is dict:
        value = args[1]
        if typing.get_origin(value) is dict or model_of(value):
            return "table of tables"
        if value is Any:
            return "table"
        return f"table of {_PLURALS.get(value, type_name(value))}"
    if inner is Any:
        return "any"
    if inner in _NAMES:
        return _NAMES[inner]
    return getattr(inner, "__name__", str(inner))


def _number(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def bounds(field: FieldInfo) -> str:
    """`> 0`, `≥ 0`, `in [0, 1]`, `pattern ...`: the field's declared constraints."""
    low: object = None
    high: object = None
    low_open = high_open = False
    pattern = None
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Gt):
            low, low_open = meta.gt, True
        elif isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Lt):
            high, high_open = meta.lt, True
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
        elif getattr(meta, "pattern", None):
            pattern = meta.pattern
    parts = []
    if low is not None and high is not None:
        parts.append(f"in {'(' if low_open else '['}{_number(low)}, {_number(high)}{')' if high_open else ']'}")
    elif low is not None:
        parts.append(f"{'>' if low_open else '≥'} {_number(low)}")
    elif high is not None:
        parts.append(f"{'<' if high_open else '≤'} {_number(high)}")
    if pattern:
        parts.append(f"matching `{pattern}`")
    return ", ".join(parts)


def toml_value(value: Any) -> str:
    """A value as it would be written in the TOML file."""
    if isinstance(value, SecretStr):
        return '"********"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, BaseModel):
        return toml_value(value.model_dump())
    return json.dumps(value)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    return f"`{toml_value(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# -- walking the model ---------------------------------------------------------------------------


def sections(model: type[BaseModel] = Settings, path: tuple[str, ...] = (), array: bool = False) -> Iterator[Section]:
    """Every TOML table of the settings, in declaration order (a table before the tables inside it)."""
    if path:
        yield Section(path, model, array)
    for name, field in model.model_fields.items():
        sub = model_of(field.annotation)
        if sub is not None:
            yield from sections(sub, (*path, name), array)
            continue
        item = item_model(field.annotation)
        if item is not None:
            yield from sections(item, (*path, name), array=True)


def env_name(path: tuple[str, ...]) -> str:
    return ENV_PREFIX + NESTED.join(path).upper()


def rows(section: Section) -> list[Row]:
    """The keys of one table (nested tables are sections of their own)."""
    out = []
    for name, field in section.model.model_fields.items():
        if model_of(field.annotation) is not None:
            continue
        kind = type_name(field.annotation)
        limits = bounds(field)
        inner, _ = without_none(field.annotation)
        is_json = typing.get_origin(inner) in (list, dict)
        item = item_model(field.annotation)
        description = field.description or ""
        if item is not None:
            description += f" Each entry is a `[[{'.'.join((*section.path, name))}]]` table (below)."
        env = None if section.array else env_name((*section.path, name)) + (" (JSON)" if is_json else "")
        out.append(
            Row(
                key=name,
                env=env,
                type=f"{kind}, {limits}" if limits else kind,
                default=default_text(field),
                description=description.strip(),
            )
        )
    return out


def leaf_env_names() -> set[str]:
    """Environment variable of every key and every section (a section takes a JSON object)."""
    names = set()
    for section in sections():
        if section.array:
            continue
        names.add(env_name(section.path))
        names.update(env_name((*section.path, name)) for name in section.model.model_fields)
    return names


# -- rendering -----------------------------------------------------------------------------------


def _section_text(section: Section) -> list[str]:
    lines = [f"## `{section.header}`", ""]
    doc = vars(section.model).get("__doc__")  # the class's own docstring, not an inherited one
    if doc:
        lines += [" ".join(inspect.cleandoc(doc).split("\n\n")[0].split()), ""]
    if section.array:
        parent = env_name(section.path)
        lines += [
            f"An array of tables: repeat `{section.header}` once per entry. From the environment the whole "
            f"list is one JSON array in `{parent}`.",
            "",
            "| Key | Type | Default | Description |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{r.key}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.description)} |" for r in rows(section)
        ]
    else:
        lines += [
            "| Key | Environment variable | Type | Default | Description |",
            "|---|---|---|---|---|",
        ]
        for r in rows(section):
            env = r.env or ""
            if env.endswith(" (JSON)"):
                env = f"`{env.removesuffix(' (JSON)')}` (JSON)"
            else:
                env = f"`{env}`"
            lines.append(f"| `{r.key}` | {env} | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.description)} |")
    lines.append("")
    return lines


def _other_variables() -> list[str]:
    lines = [
        "## Other environment variables",
        "",
        "Read when the matching setting above is not set; the standard names of the SDKs, so one "
        "environment serves the app and the sidecar.",
        "",
        "| Variable | Read by | Used for |",
        "|---|---|---|",
    ]
    for var in OTHER_VARIABLES:
        names = ", ".join(f"`{n}`" for n in var.names)
        lines.append(f"| {names} | {var.read_by} | {_cell(var.used_for)} |")
    lines.append("")
    return lines


def render() -> str:
    """The whole of docs/configuration.md."""
    all_sections = list(sections())
    lines = [INTRO, "Sections: " + " · ".join(f"[`{s.header}`](#{_slug(s)})" for s in all_sections), ""]
    for section in all_sections:
        lines += _section_text(section)
    lines += _other_variables()
    return "\n".join(lines).rstrip("\n") + "\n"


def _slug(section: Section) -> str:
    """GitHub's heading anchor for "## `[a.b]`": lower case, punctuation dropped."""
    return "".join(c for c in section.header.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the configuration reference from the settings model.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="PATH", help="write the reference to PATH")
    group.add_argument("--check", type=Path, metavar="PATH", help="exit 1 if PATH differs from the reference")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write}", file=sys.stderr)
    elif args.check:
        current = args.check.read_text(encoding="utf-8") if args.check.is_file() else ""
        if current != text:
            print(f"{args.check} is stale: run `make docs`", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
