"""The `slow` and `e2e` markers: the lists in conftest name real modules, and the Makefile's fast
subset leaves exactly those markers out while `make test` (CI) runs everything."""

from __future__ import annotations

import re

from tests.conftest import E2E_MODULES, REPO, SLOW_MODULES


def test_every_marked_module_exists() -> None:
    missing = sorted(m for m in E2E_MODULES | SLOW_MODULES if not (REPO / "tests" / m).is_file())
    assert not missing


def test_make_check_is_the_fast_subset_and_make_test_the_whole_suite() -> None:
    makefile = (REPO / "Makefile").read_text()
    check = re.search(r"^check:.*\n\t(.+)$", makefile, re.M)
    test = re.search(r"^test:.*\n\t(.+)$", makefile, re.M)
    assert check and test
    assert check[1].endswith('-m pytest -m "not slow and not e2e"')
    assert test[1].endswith("-m pytest")  # no selection: CI (.ci/run -> make test) runs every test
    assert (REPO / ".ci" / "run").read_text().strip().endswith("make test")
