"""pyproject.toml declares what the code imports, and nothing it does not use.

Every import in the engine and the connectors (read from the source, lazy imports included) is
traced to the installed distribution that provides its module file; that distribution must be a
runtime dependency. The test suite's imports must come from the runtime or the `dev` extra. A
declared dependency nobody imports is an error too, unless it is listed below with the reason.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import distributions
from pathlib import Path

from tests.conftest import REPO
from tracing_eval.extras import EXTRAS as EXTRAS_NAMED
from tracing_eval.extras import extra_of

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
OWN = {"tracing_eval", "connectors", "tests", "bench", "examples"}
#: Declared, never imported by name: what loads them and why they are needed.
USED_WITHOUT_IMPORT = {
    "ruff": "the linter tests/test_style.py runs as a command",
    "pytest-asyncio": "a pytest plugin (asyncio_mode = auto)",
    "mypy": "the type checker tests/test_types.py runs as a command",
    "types-protobuf": "type stubs mypy reads for protobuf (google.protobuf)",
    "types-grpcio": "type stubs mypy reads for grpcio",
    "setuptools": "the build backend tests/test_distribution.py builds the wheel with (no network)",
}


def name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (PEP 503)."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found[0]).lower()


SELF = name(PYPROJECT["project"]["name"])
RUNTIME = {name(r) for r in PYPROJECT["project"]["dependencies"]}
#: The optional parts (extras) -> their distributions; `all` and `dev` only gather the others.
EXTRAS = {
    extra: {name(r) for r in reqs}
    for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items()
    if extra not in ("all", "dev")
}
OPTIONAL = set().union(*EXTRAS.values())
DEV = {name(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]} - {SELF}


@cache
def owners() -> dict[Path, set[str]]:
    """Installed file, and every folder above it, -> the distributions that installed files there."""
    out: dict[Path, set[str]] = {}
    for dist in distributions():
        owner = name(dist.metadata["Name"])  # parsed from METADATA on every access: read it once
        for f in dist.files or ():
            path = Path(str(dist.locate_file(f))).resolve()
            for place in (path, *path.parents[:3]):
                out.setdefault(place, set()).add(owner)
    return out


#: Code that runs in a virtualenv of its own, with its own requirements: the conformance apps (their
#: frameworks) and the judge benchmark's peer clients and server (bench/judge.py builds their venvs).
OWN_VENV = tuple(
    REPO / p
    for p in (
        "tests/conformance/apps",
        "bench/judge_deepeval.py",
        "bench/judge_eval_lib.py",
        "bench/judge_server.py",
    )
)


def python_files(*folders: str) -> list[Path]:
    """The .py files under `folders` (relative to the repository), those of OWN_VENV left out."""
    return [
        p
        for f in folders
        for p in sorted((REPO / f).rglob("*.py"))
        if not any(p == other or p.is_relative_to(other) for other in OWN_VENV)
    ]


def imported_modules(files: list[Path]) -> dict[str, Path]:
    """Absolute third-party module names imported in `files` -> one file importing it."""
    found: dict[str, Path] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from opentelemetry import trace` imports the module opentelemetry.trace
                modules = [_submodule(node.module, a.name) for a in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                local = (path.parent / f"{top}.py").exists()  # a script's sibling module (bench/)
                if top not in sys.stdlib_module_names and top not in OWN and top != "__future__" and not local:
                    found.setdefault(module, path)
    return found


def _submodule(package: str, attribute: str) -> str:
    """`package.attribute` when that is a module of its own, else `package`."""
    if package.split(".")[0] in sys.stdlib_module_names or package.split(".")[0] in OWN:
        return package
    try:
        return f"{package}.{attribute}" if importlib.util.find_spec(f"{package}.{attribute}") else package
    except ImportError:  # `package` is a module, not a package
        return package


def distribution_of(module: str) -> str:
    """The distribution that installed `module` (a namespace package: the one owning its folder)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} is imported but not installed"
    if spec.origin not in (None, "namespace"):
        path = Path(spec.origin).resolve()
    else:
        path = Path(next(iter(spec.submodule_search_locations or []))).resolve()
    found = owners().get(path, set())
    assert len(found) == 1, f"{module} ({path}): installed by {sorted(found) or 'no distribution'}"
    return next(iter(found))


def undeclared(files: list[Path], allowed: set[str]) -> dict[str, str]:
    """`module (imported in file)` -> its distribution, for those not in `allowed`."""
    return {
        f"{module} (imported in {path.relative_to(REPO)})": dist
        for module, path in imported_modules(files).items()
        if (dist := distribution_of(module)) not in allowed
    }


def test_the_engine_and_connectors_import_only_declared_runtime_or_optional_dependencies() -> None:
    files = python_files("tracing_eval", "connectors")
    assert len(files) > 50
    assert not undeclared(files, RUNTIME | OPTIONAL)


def test_every_optional_import_is_named_with_its_extra_for_the_error_message() -> None:
    """A module from an extra is one tracing_eval/extras.py maps to that extra (the CLI names it when missing)."""
    found = {}
    for module in imported_modules(python_files("tracing_eval", "connectors")):
        dist = distribution_of(module)
        if dist not in RUNTIME:
            found[module] = ([e for e, dists in EXTRAS.items() if dist in dists], extra_of(module))
    assert {m for m, (extras, _) in found.items() if extras}, "no optional import found: is the test reading the code?"
    wrong = {m: v for m, v in found.items() if len(v[0]) != 1 or v[0][0] != v[1]}
    assert not wrong, f"module -> (extras declaring its distribution, extra named in tracing_eval/extras.py): {wrong}"


def test_all_and_dev_install_every_optional_part() -> None:
    optional = PYPROJECT["project"]["optional-dependencies"]
    assert optional["all"] == [f"tracing-eval[{','.join(EXTRAS)}]"]
    assert "tracing-eval[all]" in optional["dev"]
    assert set(EXTRAS) == set(EXTRAS_NAMED)


def test_the_tests_and_benchmarks_import_only_runtime_or_dev_dependencies() -> None:
    files = python_files("tests", "bench")
    assert len(files) > 50
    assert not undeclared(files, RUNTIME | OPTIONAL | DEV)


def test_every_declared_dependency_is_used() -> None:
    files = python_files("tracing_eval", "connectors", "tests", "bench", "examples")
    imported = {distribution_of(m) for m in imported_modules(files)}
    unused = (RUNTIME | OPTIONAL | DEV) - imported - set(USED_WITHOUT_IMPORT)
    assert not unused, f"declared in pyproject.toml, imported nowhere: {sorted(unused)}"
    assert set(USED_WITHOUT_IMPORT) <= RUNTIME | OPTIONAL | DEV, "a reason kept for a dependency no longer declared"
    assert not set(USED_WITHOUT_IMPORT) & imported, "imported after all: drop it from USED_WITHOUT_IMPORT"
