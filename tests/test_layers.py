"""The engine does not import its connectors: they reach it through the registries (entry points),
and only the assembly module, `tracing_eval/app.py`, imports `connectors` (for the Langfuse-only
commands). Read from the source, so lazy imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

ENGINE = REPO / "tracing_eval"
ASSEMBLY = ENGINE / "app.py"


def connector_imports(path: Path) -> list[str]:
    """`line: module` of every import of `connectors` (or a module under it) in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
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
        found += [f"{node.lineno}: {n}" for n in names if n == "connectors" or n.startswith("connectors.")]
    return found


def test_no_engine_module_but_the_assembly_imports_connectors() -> None:
    modules = sorted(ENGINE.rglob("*.py"))
    assert len(modules) > 80 and ASSEMBLY in modules
    offenders = {str(p.relative_to(REPO)): found for p in modules if p != ASSEMBLY and (found := connector_imports(p))}
    assert offenders == {}, f"these engine modules import connectors (go through tracing_eval.registry): {offenders}"
    assert connector_imports(ASSEMBLY), "the assembly module is where the Langfuse-only commands reach the connector"


def test_the_walk_finds_every_kind_of_import(tmp_path: Path) -> None:
    """The check cannot pass by missing an import: each form of it is found."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import connectors.langfuse\n"
        "from connectors.otlp import receiver\n"
        "import importlib\n"
        "def later():\n"
        "    from connectors.review.webhook import WebhookSink\n"
        "    return importlib.import_module('connectors.otlp.sink')\n"
        "from tracing_eval import connectors_like\n"
    )
    assert connector_imports(sample) == [
        "1: connectors.langfuse",
        "2: connectors.otlp",
        "5: connectors.review.webhook",
        "6: connectors.otlp.sink",
    ]
