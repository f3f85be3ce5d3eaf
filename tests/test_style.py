"""The code stays lint-clean and formatted (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_check_and_format() -> None:
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=REPO, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
