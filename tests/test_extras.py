"""The default install (no extra) runs the demo; a command that needs an extra says which one to install.

Each CLI run is a fresh interpreter in which the modules of every extra cannot be imported (a `None`
entry in `sys.modules` makes Python refuse them), as in an install without the extras.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES
from tracing_eval.extras import EXTRAS, extra_of, missing_extra_message

BLOCKED = [m for modules in EXTRAS.values() for m in modules]
WITHOUT_EXTRAS = (
    f"import sys\nfor m in {BLOCKED!r}:\n    sys.modules[m] = None\n"
    "from tracing_eval.cli import main\nmain(prog_name='tracing-eval')\n"
)
FILES = [f"otlp-file:{EXAMPLES / name}" for name in ("otel-genai.otlp.jsonl", "openinference.otlp.jsonl")]


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`tracing-eval ARGS` in `cwd` without any extra, with only `env` of our own settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACING_EVAL_", "LANGFUSE_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *args],
        cwd=cwd,
        env={**clean, **env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
    )


def test_the_demo_runs_without_any_extra(tmp_path: Path) -> None:
    run = cli(tmp_path, "run", "--once", *(a for f in FILES for a in ("--source", f)))
    assert run.returncode == 0, run.stdout + run.stderr
    results = cli(tmp_path, "results", "--format", "jsonl")
    assert results.returncode == 0, results.stderr
    records = [json.loads(line) for line in results.stdout.splitlines()]
    threads = {r["thread_key"] for r in records}
    # both example files were read and scored (OpenInference threads are keyed otlp:oi/...)
    assert any(k.startswith("otlp:oi/") for k in threads) and any(not k.startswith("otlp:oi/") for k in threads)


@pytest.mark.parametrize(
    ("args", "env", "extra"),
    [
        (["run", "--once", "--source", FILES[0], "--sink", "otlp"], {}, "otlp-sink"),
        (["results"], {"TRACING_EVAL_STORE__URL": "postgresql+asyncpg://postgres@127.0.0.1:5432/test"}, "postgres"),
        (
            ["run", "--once", "--source", "langfuse"],
            {"LANGFUSE_PUBLIC_KEY": "pk-lf-x", "LANGFUSE_SECRET_KEY": "sk-lf-x", "LANGFUSE_HOST": "http://127.0.0.1:9"},
            "langfuse",
        ),
    ],
)
def test_a_command_that_needs_an_extra_names_it_in_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], extra: str
) -> None:
    run = cli(tmp_path, *args, **env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert f"needs the optional part '{extra}'" in run.stderr
    assert f"pip install 'tracing-eval[{extra}]'" in " ".join(run.stderr.split())


def test_doctor_reports_the_missing_langfuse_extra_as_a_failed_check(tmp_path: Path) -> None:
    env = {"LANGFUSE_PUBLIC_KEY": "pk-lf-x", "LANGFUSE_SECRET_KEY": "sk-lf-x", "LANGFUSE_HOST": "http://127.0.0.1:9"}
    run = cli(tmp_path, "doctor", "--source", "langfuse", **env)
    assert run.returncode == 1, run.stdout + run.stderr
    out = " ".join(run.stdout.split())
    assert "FAIL langfuse: this needs the optional part 'langfuse'" in out
    assert "ok store:" in out


def test_only_modules_of_an_extra_are_reported_as_an_extra() -> None:
    assert extra_of("opentelemetry.sdk._logs") == "otlp-sink"
    assert extra_of("langfuse.api") == "langfuse" and extra_of("asyncpg") == "postgres"
    assert extra_of("opentelemetry.proto") is None and extra_of("langfuse_other") is None
    # a module missing from the default install itself is a bug, and stays a traceback
    assert missing_extra_message(ModuleNotFoundError("no", name="rapidfuzz")) is None
