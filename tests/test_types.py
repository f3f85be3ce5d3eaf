"""The engine and the connectors type-check with mypy, configured in pyproject.toml ([tool.mypy])."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mypy ARGS` from the repository (its config and its incremental cache)."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=REPO, capture_output=True, text=True)


def test_the_package_code_has_no_type_errors() -> None:
    run = mypy()
    assert run.returncode == 0, run.stdout + run.stderr
    checked = re.search(r"no issues found in (\d+) source files", run.stdout)
    assert checked, run.stdout
    # every module of tracing_eval/ and connectors/ is checked, not just a few
    modules = [*(REPO / "tracing_eval").rglob("*.py"), *(REPO / "connectors").rglob("*.py")]
    assert int(checked[1]) == len(modules) > 90


def test_the_checker_catches_a_source_that_does_not_satisfy_the_protocol(tmp_path: Path) -> None:
    """The configuration is strict enough to catch a protocol mismatch and an unannotated function."""
    bad = tmp_path / "bad_source.py"
    bad.write_text(
        "from tracing_eval.sources import PullSource, Source\n"
        "from tracing_eval.store.base import Store\n\n\n"
        "class NoName(PullSource):\n"
        "    async def pull(self, store: Store, now: float) -> int:\n"
        "        return 0\n\n\n"
        "def untyped(x):\n"
        "    return x\n\n\n"
        "source: Source = NoName()\n"
    )
    run = mypy("--config-file", str(REPO / "pyproject.toml"), str(bad))
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r'bad_source\.py:14: error: Incompatible types in assignment .*"Source"', run.stdout), run.stdout
    assert re.search(r'"NoName" is missing following "Source" protocol member:\n.*note:\s+name\n', run.stdout)
    assert re.search(r"bad_source\.py:10: error: Function is missing a type annotation", run.stdout), run.stdout
