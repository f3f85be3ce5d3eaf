"""The engine does not import its connectors: they reach it through the registries (entry points),
and only the assembly module, `tracing_eval/app.py`, imports `tracing_eval.connectors` (for the
Langfuse-only commands). `tracing_eval/connectors` is a link to the top-level `connectors/` folder, so
the connectors themselves are left out of the walk. Read from the source, so lazy imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

ENGINE = REPO / "tracing_eval"
ASSEMBLY = ENGINE / "app.py"
CONNECTORS = "tracing_eval.connectors"


def connector_imports(path: Path) -> list[str]:
    """`line: module` of every import of `tracing_eval.connectors` (or a module under it) in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        hits = [n for n in names if n == CONNECTORS or n.startswith(CONNECTORS + ".")]
        found += [(node.lineno, hits[0])] if hits else []
    return [f"{line}: {name}" for line, name in sorted(found)]


def test_no_engine_module_but_the_assembly_imports_connectors() -> None:
    modules = sorted(p for p in ENGINE.rglob("*.py") if not p.is_relative_to(ENGINE / "connectors"))
    assert len(modules) > 80 and ASSEMBLY in modules
    offenders = {str(p.relative_to(REPO)): found for p in modules if p != ASSEMBLY and (found := connector_imports(p))}
    assert offenders == {}, f"these engine modules import connectors (go through tracing_eval.registry): {offenders}"
    assert connector_imports(ASSEMBLY), "the assembly module is where the Langfuse-only commands reach the connector"


def test_the_walk_finds_every_kind_of_import(tmp_path: Path) -> None:
    """The check cannot pass by missing an import: each form of it is found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import tracing_eval.connectors.langfuse\n"
        "from tracing_eval.connectors.otlp import receiver\n"
        "import importlib\n"
        "def later():\n"
        "    from tracing_eval.connectors.review.webhook import WebhookSink\n"
        "    return importlib.import_module('tracing_eval.connectors.otlp.sink')\n"
        "from tracing_eval import connectors_like\n"
        "from tracing_eval import connectors\n"
    )
    assert connector_imports(sample) == [
        "1: tracing_eval.connectors.langfuse",
        "2: tracing_eval.connectors.otlp",
        "5: tracing_eval.connectors.review.webhook",
        "6: tracing_eval.connectors.otlp.sink",
        "8: tracing_eval.connectors",
    ]
