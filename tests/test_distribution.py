"""What `pip install` puts on the path.

The wheel holds one top-level package, `tracing_eval`: the repository's `connectors/` folder installs as
`tracing_eval.connectors` (`tracing_eval/connectors` is a symbolic link to it, which setuptools, mypy
and Python all follow), so no package named `connectors` lands in site-packages. The wheel is built from
exactly what deploy/Dockerfile copies into its build stage.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCKERFILE = REPO / "deploy" / "Dockerfile"
#: Text files where a module path may be written (code, docs, configuration).
TEXT = ("*.py", "*.md", "*.toml", "*.txt", "*.yaml", "*.yml", "*.cfg", "*.ini", "Makefile", "Dockerfile")
NOT_OURS = ("tests/data", "bench/out", "node_modules")
#: A dotted module path that starts at the top-level name `connectors` (the rewrite of the move).
TOP_LEVEL_CONNECTORS = re.compile(r"(?<![\w./-])connectors\.[A-Za-z_]|^\s*(from|import) connectors\b", re.M)


def build_stage_copies() -> list[tuple[str, str]]:
    """(source, destination) of every COPY into the build folder of deploy/Dockerfile."""
    copies = re.findall(r"^COPY (?!--)(.+) (\./\S*)$", DOCKERFILE.read_text(), re.M)
    return [(src, dst) for sources, dst in copies for src in sources.split()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built (with the installed setuptools, no network) from the Dockerfile's build context."""
    src = tmp_path_factory.mktemp("context")
    for source, dest in build_stage_copies():
        target = src / (Path(source).name if dest.endswith("/") else dest)
        if (REPO / source).is_dir():
            subprocess.run(["cp", "-a", str(REPO / source), str(target)], check=True)  # links stay links
        else:
            target.write_bytes((REPO / source).read_bytes())
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = out.glob("tracing_eval-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_installs_only_tracing_eval_with_every_connector_module_inside(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"tracing_eval", wheel.name.split("-py3")[0] + ".dist-info"}
    connectors = {p.relative_to(REPO).as_posix() for p in (REPO / "connectors").rglob("*.py")}
    assert len(connectors) > 10
    assert {f"tracing_eval/{p}" for p in connectors} <= set(names)
    engine = {p.relative_to(REPO).as_posix() for p in (REPO / "tracing_eval").rglob("*.py")}
    assert engine <= set(names)


@pytest.mark.slow
def test_every_module_of_the_installed_wheel_imports_and_connectors_is_not_a_top_level_name(
    wheel: Path, tmp_path: Path
) -> None:
    """Unpacked (a pure-Python wheel is its install) and imported by a fresh interpreter outside the repository."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    modules = sorted(
        n.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for n in zipfile.ZipFile(wheel).namelist()
        if n.endswith(".py") and not n.endswith("__main__.py")
    )
    script = (
        "import importlib, importlib.util, sys\n"
        f"site = {str(site)!r}\n"
        "bad = []\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        "    if not module.__file__.startswith(site):\n"
        "        bad.append((name, module.__file__))\n"
        "assert not bad, bad\n"
        "assert importlib.util.find_spec('connectors') is None, importlib.util.find_spec('connectors')\n"
        "print(len(sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(modules) > 100


def test_the_docker_context_lets_through_what_the_build_stage_copies() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    sources = {src for src, _ in build_stage_copies()}
    assert {"pyproject.toml", "tracing_eval", "connectors"} <= sources
    assert sources <= allowed


def text_files() -> list[Path]:
    """Code, docs and configuration of the repository (the installed packages' folders left out)."""
    found = []
    for root, dirs, files in os.walk(REPO):
        rel = Path(root).relative_to(REPO).as_posix()
        dirs[:] = [d for d in dirs if not d.startswith(".") and (Path(rel) / d).as_posix() not in NOT_OURS]
        found += [Path(root) / f for f in files if any(Path(f).match(p) for p in TEXT)]
    return found


def test_nothing_refers_to_connectors_as_a_top_level_package() -> None:
    """A path from `connectors` down would import a second copy of the module (the repository folder's)."""
    files = text_files()
    assert len(files) > 200
    wrong = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]!r}"
        for path in files
        for text in [path.read_text(errors="replace")]
        for m in TOP_LEVEL_CONNECTORS.finditer(text)
    ]
    assert not wrong, "write tracing_eval.connectors instead:\n" + "\n".join(wrong)
