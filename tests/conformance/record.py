"""Record the conformance corpus: the scripted conversations played through real framework libraries.

    .venv/bin/python -m tests.conformance.record --setup           # make the recording environments
    .venv/bin/python -m tests.conformance.record                   # record every framework
    .venv/bin/python -m tests.conformance.record strands vercel-ai # record some of them

Each framework runs in an environment of its own, outside the product's dependencies: a venv
per requirements file under `.venv-conformance/` (pinned in `requirements/*.txt`), and
`apps/vercel/node_modules` (pinned in `package-lock.json`). The app (`apps/*`) talks to the fake
OpenAI-compatible server on 127.0.0.1, which plays `conversations.scripts()`, and exports its
spans over OTLP/HTTP to a loopback capture endpoint that writes `recordings/<name>.otlp.jsonl` in
the Collector file exporter's format. The library versions each app ran with go to
`recordings/versions.json`. No network, no API key.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from examples.otlp_capture import CaptureEndpoint
from tests.conformance.conversations import plan, scripts
from tests.support.fakes.openai_server import FakeOpenAIServer, ScriptedHandler

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VENVS = REPO / ".venv-conformance"
RECORDINGS = HERE / "recordings"
VERSIONS = RECORDINGS / "versions.json"
NODE_APP = HERE / "apps" / "vercel"


@dataclass(frozen=True)
class Recording:
    """One framework (and mode) to record: the environment it runs in and its app."""

    name: str
    library: str  # the framework's package, whose version the docs name
    env: str  # a requirements file under requirements/, or "node"
    app: str  # under apps/
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return RECORDINGS / f"{self.name}.otlp.jsonl"

    def command(self, plan_file: Path) -> list[str]:
        if self.env == "node":
            return ["node", str(HERE / "apps" / self.app), str(plan_file)]
        return [str(VENVS / self.env / "bin" / "python"), str(HERE / "apps" / self.app), str(plan_file)]


RECORDINGS_LIST: tuple[Recording, ...] = (
    Recording("langgraph", "langgraph", "langchain", "langgraph_app.py"),
    Recording("langchain", "langchain-core", "langchain", "langchain_app.py"),
    Recording("strands", "strands-agents", "strands", "strands_app.py"),
    Recording(
        "strands-latest",
        "strands-agents",
        "strands",
        "strands_app.py",
        {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
    ),
    Recording("vercel-ai", "ai", "node", "vercel/app.mjs"),
    Recording("openai-agents", "openai-agents", "openai_agents", "openai_agents_app.py"),
    Recording("openllmetry", "traceloop-sdk", "openllmetry", "openllmetry_app.py"),
    Recording("pydantic-ai", "pydantic-ai-slim", "pydantic_ai", "pydantic_ai_app.py"),
    Recording("langfuse", "langfuse", "langfuse", "langfuse_app.py"),
)
BY_NAME = {r.name: r for r in RECORDINGS_LIST}


def setup(envs: set[str]) -> None:
    """Create (or update) the recording environments the given recordings need."""
    for env in sorted(envs):
        if env == "node":
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_APP, check=True)
            continue
        venv = VENVS / env
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "-r", str(HERE / "requirements" / f"{env}.txt")], check=True)


def app_env(recording: Recording, llm: FakeOpenAIServer, capture: CaptureEndpoint) -> dict[str, str]:
    """The app's environment: this one without OTEL_* and provider settings, plus the loopback endpoints."""
    dropped = ("OTEL_", "OPENAI_", "LANGFUSE_", "LANGCHAIN_", "LANGSMITH_", "TRACELOOP_", "AWS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="sk-conformance-not-a-key",
        OTEL_EXPORTER_OTLP_ENDPOINT=capture.endpoint,
        OTEL_SERVICE_NAME=f"conformance-{recording.name}",
        TRACELOOP_TELEMETRY="false",
        **recording.extra_env,
    )
    return env


def record(recording: Recording) -> dict[str, str]:
    """Play the conversations through one framework; return the library versions it reported."""
    handler = ScriptedHandler(scripts())
    with tempfile.TemporaryDirectory() as tmp:
        plan_file = Path(tmp) / "plan.json"
        plan_file.write_text(json.dumps(plan(recording.name + "/")), encoding="utf-8")
        with CaptureEndpoint(recording.path) as capture, FakeOpenAIServer(handler) as llm:
            done = subprocess.run(
                recording.command(plan_file), env=app_env(recording, llm, capture), capture_output=True, text=True
            )
    if done.returncode != 0:
        raise SystemExit(f"{recording.name}: the app failed ({done.returncode}):\n{done.stderr[-4000:]}")
    left = {k[:40]: n for k, n in handler.remaining().items() if n}
    if left:
        raise SystemExit(f"{recording.name}: scripted replies left unused (the app diverged): {left}")
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"versions"')]
    if not lines:
        raise SystemExit(f"{recording.name}: the app did not report its library versions")
    print(f"{recording.name}: {capture.requests} export requests -> {recording.path.relative_to(REPO)}")
    return json.loads(lines[-1])["versions"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"recordings to make (default: all of {', '.join(BY_NAME)})")
    parser.add_argument("--setup", action="store_true", help="create the recording environments first")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown recording(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.names] or list(RECORDINGS_LIST)
    if args.setup:
        setup({r.env for r in chosen})
    RECORDINGS.mkdir(exist_ok=True)
    versions = json.loads(VERSIONS.read_text()) if VERSIONS.exists() else {}
    for recording in chosen:
        versions[recording.name] = record(recording)
        VERSIONS.write_text(json.dumps(versions, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
