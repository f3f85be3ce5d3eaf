"""Regenerate the example OTLP payloads and transcripts from real instrumentation.

    .venv/bin/python examples/generate.py              # rewrites the files in examples/
    .venv/bin/python examples/generate.py --out OUT_DIR   # writes them elsewhere

Runs the support bot (`support_bot.py`) through the scripted conversations (`conversations.py`)
against the fake OpenAI server (`tests/support/fakes/openai_server.py`) three times:

- `otel-genai.otlp.jsonl`: opentelemetry-instrumentation-genai-openai + util-genai spans and log
  events, exported by the real OTLP/HTTP exporters (gzip) to a capture endpoint (`otlp_capture.py`);
- `openinference.otlp.jsonl`: openinference-instrumentation-openai with OpenInference AGENT/TOOL spans;
- `transcripts.jsonl`: the uninstrumented run, in the `tracing-eval eval` input schema.

Each instrumented variant runs in its own subprocess so the two instrumentations never stack.
Content is the same on every run; trace/span ids and timestamps are new each time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # for tests.support.fakes

import openai  # noqa: E402
from conversations import CONVERSATIONS, scripts  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from otlp_capture import CaptureEndpoint  # noqa: E402
from support_bot import AGENT_NAME, NoTelemetry, Telemetry, run_conversation  # noqa: E402

from tests.support.fakes.openai_server import FakeOpenAIServer, ScriptedHandler  # noqa: E402

VARIANTS = {"otel-genai": "telemetry_genai", "openinference": "telemetry_openinference"}
#: Each variant is a separate "app", so its conversation ids get their own prefix.
PREFIXES = {"otel-genai": "genai/", "openinference": "oi/"}
TRANSCRIPTS = "transcripts.jsonl"


def output_name(variant: str) -> str:
    return f"{variant}.otlp.jsonl"


def play_all(
    base_url: str, telemetry: Telemetry, after_each: Callable[[], None] | None = None, prefix: str = ""
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Run every conversation; `after_each()` runs after each one (to flush the exporters)."""
    out = []
    with openai.OpenAI(base_url=base_url, api_key="sk-example-not-a-key", max_retries=0) as client:
        for conv in CONVERSATIONS:
            messages = run_conversation(client, prefix + conv.id, list(conv.user_turns), telemetry, stream=conv.stream)
            out.append((conv.id, messages))
            if after_each is not None:
                after_each()
    return out


def check_scripts_used(handler: ScriptedHandler) -> None:
    left = {k: n for k, n in handler.remaining().items() if n}
    if left:
        raise SystemExit(f"scripted replies left unused (the bot diverged from the script): {left}")


def run_variant(variant: str, out: Path) -> None:
    """One instrumented run, in this process, writing `out/<variant>.otlp.jsonl`."""
    module = importlib.import_module(VARIANTS[variant])
    os.environ.update(module.ENV)
    resource = Resource.create(
        {"service.name": AGENT_NAME, "service.version": "1.0.0", "deployment.environment.name": "example"}
    )
    handler = ScriptedHandler(scripts())
    with CaptureEndpoint(out / output_name(variant)) as capture, FakeOpenAIServer(handler) as llm:
        telemetry, pipeline = module.setup(capture.endpoint, resource)
        play_all(llm.base_url, telemetry, pipeline.flush, PREFIXES[variant])
        pipeline.shutdown()
    check_scripts_used(handler)
    print(f"{variant}: {capture.requests} export requests ({capture.gzipped} gzip) -> {capture.path}")


def child_env() -> dict[str, str]:
    """This environment minus OTEL_* settings (exporters, resource, sampling) that would change the output."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def write_transcripts(path: Path) -> None:
    handler = ScriptedHandler(scripts())
    with FakeOpenAIServer(handler) as llm:
        threads = play_all(llm.base_url, NoTelemetry())
    check_scripts_used(handler)
    with path.open("w", encoding="utf-8") as f:
        for thread_id, messages in threads:
            f.write(json.dumps({"thread_id": thread_id, "turns": messages}, ensure_ascii=False) + "\n")
    print(f"transcripts: {len(threads)} threads -> {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: examples/)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)  # the subprocess mode
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.variant:
        run_variant(args.variant, out)
        return
    for variant in VARIANTS:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--variant", variant, "--out", str(out)]
        subprocess.run(cmd, check=True, env=child_env())
    write_transcripts(out / TRANSCRIPTS)


if __name__ == "__main__":
    main()
