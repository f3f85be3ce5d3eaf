"""docs/configuration.md is generated from the settings model and must not go stale."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from tests.conftest import REPO
from tracing_eval import configdoc
from tracing_eval.config import ENV_PREFIX, Settings, load_settings

DOC = REPO / "docs" / "configuration.md"
#: Wrong names the docs show on purpose, as the mistake to avoid.
MISTAKES = {"TRACING_EVAL_JUDGE_MODEL", "TRACING_EVAL_JUDGE__MODLE", "TRACING_EVAL_SINKS__EXAMPLE__FILE"}
#: Keys of the example sink package of docs/extending.md, real once it is installed (tests/test_extending.py)
EXAMPLE_PACKAGE = {"TRACING_EVAL_SINKS__EXAMPLE__PATH"}


def leaf_keys(model: type = Settings, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key of the settings that is not itself a table of keys."""
    out = []
    for name, field in model.model_fields.items():
        sub = configdoc.model_of(field.annotation)
        out += leaf_keys(sub, (*path, name)) if sub else [(*path, name)]
    return out


def test_configuration_md_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == configdoc.render(), (
        "docs/configuration.md is stale: run `make docs` (python -m tracing_eval.configdoc --write docs/configuration.md)"
    )


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# old\n")
    assert configdoc.main(["--check", str(stale)]) == 1
    assert configdoc.main(["--write", str(stale)]) == 0
    assert configdoc.main(["--check", str(stale)]) == 0


def test_every_key_has_a_row_with_its_environment_variable_and_description() -> None:
    text = configdoc.render()
    for path in leaf_keys():
        env = ENV_PREFIX + "__".join(path).upper()
        row = next((line for line in text.splitlines() if line.startswith(f"| `{path[-1]}` | `{env}`")), None)
        assert row is not None, f"no row for {'.'.join(path)} ({env})"
        assert row.rstrip().endswith("|") and not row.rstrip().endswith("|  |"), f"empty description: {row}"


def test_array_tables_list_the_fields_of_their_items() -> None:
    text = configdoc.render()
    for header, model_path in (
        ("[[metrics.criteria]]", ("metrics", "criteria")),
        ("[[review.routes]]", ("review", "routes")),
    ):
        assert f"## `{header}`" in text
        section = next(s for s in configdoc.sections() if s.path == model_path)
        assert section.array
        for name in section.model.model_fields:
            assert f"| `{name}` |" in text.split(f"## `{header}`", 1)[1]


SPECIAL = {
    ("http", "address"): "127.0.0.1:1",
    ("receiver", "grpc_address"): "127.0.0.1:2",
    ("receiver", "max_body_bytes"): "1048576",  # at most half of max_inflight_bytes
    ("langfuse", "since"): "1h",
}


def sample_value(path: tuple[str, ...], info: FieldInfo) -> str:
    """A valid value for the key, different from its default, as an environment string."""
    if path in SPECIAL:
        return SPECIAL[path]
    inner, _ = configdoc.without_none(info.annotation)
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    default = info.get_default(call_default_factory=True)
    if origin is Literal:
        return str(next(a for a in reversed(args) if a != default))
    if inner is bool:
        return "false" if default else "true"
    if inner in (int, float):
        high = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), None)
        value = high / 2 + (1 if inner is int else 0) if high is not None else (default or 0) + 1
        return str(inner(value))
    item = configdoc.item_model(info.annotation)
    if item is not None:
        return json.dumps([{name: "x" for name, f in item.model_fields.items() if f.is_required()}])
    if origin is list:
        return '["x"]'
    if origin is dict:
        value = args[1]
        return (
            '{"x": {"a": 1}}'
            if value is not str and value is not float
            else ('{"x": "y"}' if value is str else '{"x": 0.5}')
        )
    return "x-value"


def test_documented_environment_variables_really_set_their_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The variable named in each row is the one pydantic-settings reads (a wrong name would be ignored)."""
    monkeypatch.chdir(tmp_path)
    defaults = Settings()
    not_set = []
    for path in leaf_keys():
        model: Any = Settings
        for name in path[:-1]:
            model = configdoc.model_of(model.model_fields[name].annotation)
        info = model.model_fields[path[-1]]
        env = ENV_PREFIX + "__".join(path).upper()
        with monkeypatch.context() as m:
            m.setenv(env, sample_value(path, info))
            value: Any = load_settings(None)
        default: Any = defaults
        for name in path:
            value, default = getattr(value, name), getattr(default, name)
        if value == default:
            not_set.append(env)
    assert not not_set, f"these variables did not change their key: {not_set}"


def test_other_variables_are_really_read_by_the_code() -> None:
    source = "\n".join(
        p.read_text(encoding="utf-8")
        for folder in ("tracing_eval", "connectors")
        for p in (REPO / folder).rglob("*.py")
        if p.name != "configdoc.py"
    )
    for var in configdoc.OTHER_VARIABLES:
        if var.read_by != "tracing-eval":
            continue
        for name in var.names:
            assert f'"{name}"' in source, f"{name} is listed as read by tracing-eval but no code reads it"


def test_environment_variables_named_in_the_docs_exist() -> None:
    """Every TRACING_EVAL_* name in the README, config example and docs is a real key or section."""
    valid = configdoc.leaf_env_names()
    tables = {
        configdoc.env_name((*s.path, name))
        for s in configdoc.sections()
        if not s.array
        for name, f in s.model.model_fields.items()
        if configdoc.type_name(f.annotation).startswith("table")
    }
    files = [REPO / "README.md", REPO / "config.example.toml", *sorted((REPO / "docs").glob("*.md"))]
    bad = []
    for path in files:
        for name in set(re.findall(rf"{ENV_PREFIX}[A-Z0-9_]+", path.read_text(encoding="utf-8"))):
            prefix = name.rstrip("_")
            if name in valid or (name.endswith("__") and prefix in valid):
                continue
            if any(name.startswith(t + "__") for t in tables):
                continue  # one entry of a table, e.g. ..._METRICS__THRESHOLDS__REPETITION
            if name not in MISTAKES | EXAMPLE_PACKAGE:
                bad.append(f"{path.relative_to(REPO)}: {name}")
    assert not bad, "unknown settings variables: " + ", ".join(sorted(bad))
