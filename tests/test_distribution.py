"""What `pip install` puts on the path, and at which versions.

The wheel holds one top-level package, `tracing_eval`: the repository's `connectors/` folder installs as
`tracing_eval.connectors` (`tracing_eval/connectors` is a symbolic link to it, which setuptools, mypy
and Python all follow), so no package named `connectors` lands in site-packages. The wheel is built from
exactly what deploy/Dockerfile copies into its build stage.

constraints.txt, written by `make lock`, pins every distribution the dev install needs (every extra
included); the Makefile's installs and the Docker image install through it (`pip install -c`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO

DOCKERFILE = REPO / "deploy" / "Dockerfile"
LOCK = REPO / "constraints.txt"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
SELF = canonicalize_name(PROJECT["name"])
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


def pins() -> dict[str, Version]:
    """constraints.txt: distribution -> its pinned version (every line must be an exact pin)."""
    out = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==" and not requirement.marker, f"constraints.txt: {line!r} is not a pin"
            out[canonicalize_name(requirement.name)] = Version(spec.version)
    return out


def declared() -> list[Requirement]:
    """Every requirement pyproject.toml declares: the runtime ones and each extra's (the project left out)."""
    lines = PROJECT["dependencies"] + [r for reqs in PROJECT["optional-dependencies"].values() for r in reqs]
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != SELF]


def needed_by_the_dev_install() -> dict[str, Version]:
    """Every distribution `tracing-eval[dev]` pulls in, followed through the installed metadata, -> its version."""
    found: dict[str, Version] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(SELF, frozenset({"dev"}))]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise AssertionError(f"{name} is needed but not installed: run `make install-dev`") from None
        if name != SELF:
            found[name] = Version(dist.version)
        for line in dist.requires or ():
            requirement = Requirement(line)
            wanted = requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in extras | {""}
            )
            if wanted:
                todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return found


def test_the_lock_pins_every_declared_dependency_at_a_version_pyproject_allows() -> None:
    locked = pins()
    requirements = declared()
    assert len(requirements) > 30
    missing = sorted(str(r) for r in requirements if canonicalize_name(r.name) not in locked)
    assert not missing, f"declared in pyproject.toml, not in constraints.txt (run `make lock`): {missing}"
    outside = {
        str(r): str(locked[canonicalize_name(r.name)])
        for r in requirements
        if not r.specifier.contains(locked[canonicalize_name(r.name)], prereleases=True)
    }
    assert not outside, f"pinned outside the declared bounds (run `make lock`): {outside}"


def test_the_lock_is_exactly_what_the_dev_install_needs_at_the_installed_versions() -> None:
    """Nothing needed is left unpinned, nothing pinned is unneeded, and this environment is the locked one."""
    locked, needed = pins(), needed_by_the_dev_install()
    assert len(needed) > 60
    assert not needed.keys() - locked.keys(), (
        f"needed, not pinned (run `make lock`): {sorted(needed.keys() - locked.keys())}"
    )
    assert not locked.keys() - needed.keys(), (
        f"pinned, not needed (run `make lock`): {sorted(locked.keys() - needed.keys())}"
    )
    differ = {
        name: f"{version} installed, {locked[name]} locked"
        for name, version in needed.items()
        if version != locked[name]
    }
    assert not differ, f"this environment is not the locked one (run `make install-dev`): {differ}"


def test_every_install_goes_through_the_lock() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^LOCK := constraints\.txt$", makefile, re.M)
    installs = re.findall(r"^\t.*\bpip install\b.*$", makefile, re.M)
    project_installs = [line for line in installs if re.search(r"-e \S*\.|'\.\[", line)]
    assert len(project_installs) >= 2
    # the one install without the lock is the one that writes it
    assert all("-c $(LOCK)" in line for line in project_installs if ".venv-lock" not in line), project_installs
