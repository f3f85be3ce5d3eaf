"""A sink from another package, loaded through a real entry point (docs/extending.md).

tests/data/example_sink_pkg is such a package: one module and one `tracing_eval.sinks` line in its
pyproject.toml. The test registers it the way an installed distribution is registered (a
`.dist-info` with its entry points, made from that pyproject.toml, on the path of a new process),
then runs `tracing-eval run --once --sink example` end to end and reads what the sink wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO

PACKAGE = REPO / "tests" / "data" / "example_sink_pkg"
SOURCE = f"otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}"


def install(site: Path) -> None:
    """What installing the package leaves on the path: its module and a dist-info with its entry points."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
            for group, entries in groups.items()
        )
    )
    shutil.copy(PACKAGE / "example_sink.py", site / "example_sink.py")


def cli(tmp_path: Path, *args: str, site: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRACING_EVAL_")}
    environ.update(COLUMNS="250", TRACING_EVAL_STORE__URL=f"sqlite+aiosqlite:///{tmp_path / 'store.db'}", **env)
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "tracing_eval", *args], cwd=tmp_path, env=environ, capture_output=True, text=True
    )


def run_once_to_example(tmp_path: Path, site: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, "run", "--once", "--source", SOURCE, "--sink", "example", site=site, **env)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    install(tmp_path / "site")
    return tmp_path / "site"


def test_run_once_delivers_every_result_to_a_sink_from_another_package(tmp_path: Path, site: Path) -> None:
    out = tmp_path / "delivered.jsonl"
    run = run_once_to_example(tmp_path, site, TRACING_EVAL_SINKS__EXAMPLE__PATH=str(out))
    assert run.returncode == 0, run.stderr
    stored = [json.loads(line) for line in cli(tmp_path, "results", "--format", "jsonl").stdout.splitlines()]
    expected = sum(len(r["metrics"]) + sum(len(t["metrics"]) for t in r["turns"]) for r in stored)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert expected > 20 and len(lines) == expected, run.stderr
    assert f"delivered {expected}, retrying 0" in run.stderr
    assert {line["kind"] for line in lines} == {"result"}  # it takes results only: no review items
    assert len({line["result_id"] for line in lines}) == expected
    # the review queue still filled (local), and the example sink was not asked for review items
    assert "routed to review" in run.stderr and "4 routed to review" in run.stderr


def test_the_package_s_sink_and_settings_section_appear_where_the_built_in_ones_do(tmp_path: Path, site: Path) -> None:
    helped = cli(tmp_path, "run", "--help", site=site)
    assert "Result sinks, example, langfuse, otlp or webhook" in " ".join(helped.stdout.split())
    doc = subprocess.run(
        [sys.executable, "-m", "tracing_eval.configdoc"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert doc.returncode == 0, doc.stderr
    assert "## `[sinks.example]`" in doc.stdout and "`TRACING_EVAL_SINKS__EXAMPLE__PATH`" in doc.stdout
    bad = run_once_to_example(tmp_path, site, TRACING_EVAL_SINKS__EXAMPLE__FILE="x.jsonl")  # the key is `path`
    assert bad.returncode == 2
    assert "sinks.example.file: unknown key" in bad.stderr and "TRACING_EVAL_SINKS__EXAMPLE__FILE" in bad.stderr


def test_without_the_package_the_sink_is_unknown_and_the_error_lists_the_known_ones(tmp_path: Path) -> None:
    run = run_once_to_example(tmp_path, None)
    assert run.returncode == 2
    assert "unknown or unavailable sink(s) example; available: local, langfuse, otlp, webhook" in run.stderr


@pytest.mark.parametrize(
    ("group", "value"), [("tracing_eval.sinks", "broken_mod:SINK"), ("tracing_eval.metrics", "broken_mod")]
)
def test_an_entry_point_that_cannot_be_imported_is_one_line_naming_it(tmp_path: Path, group: str, value: str) -> None:
    """A package whose module fails to import: the command names the entry point and why, exit 2."""
    site = tmp_path / "site"
    info = site / "broken_pkg-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nbroken = {value}\n")
    (site / "broken_mod.py").write_text("import a_module_that_is_not_installed\n")
    run = cli(tmp_path, "run", "--once", "--source", SOURCE, site=site)
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.strip().splitlines()
    assert (
        f"entry point broken = {value} of {group} cannot be loaded: No module named 'a_module_that_is_not_installed'"
        in line
        and "Traceback" not in run.stderr
    )
