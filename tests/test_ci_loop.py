"""The whole loop of docs/ci-gate.md: failed production threads -> scenarios -> simulated against the
bot -> a 3-run baseline -> the gate passes an unchanged bot and fails a worse one.

Everything goes through the CLI; the bot and the judge (which also plays the user) are loopback
OpenAI-compatible fakes reached through the real `openai` client.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import EXAMPLES
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tracing_eval.cli import main

ANSWERS = [
    "I found your order; it left our warehouse yesterday.",
    "The carrier expects to deliver it on Friday morning.",
    "You can follow the parcel with the tracking link in your email.",
    "Anything else I can do for you today?",
]


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


class Judge:
    """Plays the user (three messages, then goal reached) and answers every metric validly."""

    def __init__(self) -> None:
        self.metrics = SchemaJudge()

    def __call__(self, request: dict[str, Any]) -> Reply:
        instructions = request["messages"][-1]["content"]
        found = re.search(r"has sent (\d+) of", instructions)
        if found is None or "simulated_user" not in json.dumps(request.get("response_format")):
            return self.metrics(request)
        sent = int(found[1])
        if sent >= 3:
            return Reply(json.dumps({"reason": "done", "status": "goal_reached", "message": ""}))
        opener = re.search(r"The user's goal: (.*)", instructions)[1]  # type: ignore[index]
        message = opener if sent == 0 else f"Follow-up question number {sent} about that, please."
        return Reply(json.dumps({"reason": "next", "status": "continue", "message": message}))


def good_bot(request: dict[str, Any]) -> Reply:
    turn = sum(1 for m in request["messages"] if m["role"] == "user")
    return Reply(ANSWERS[(turn - 1) % len(ANSWERS)])


def bad_bot(request: dict[str, Any]) -> Reply:
    return Reply("I am sorry, I cannot help with that right now.")


def test_failures_to_scenarios_to_simulation_to_a_gate_that_catches_a_worse_bot(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1. production: the sidecar scored the traffic and found failed threads (no judge yet)
    assert invoke("run", "--once", f"--source=otlp-file:{EXAMPLES / 'otel-genai.otlp.jsonl'}").exit_code == 0
    scenarios = tmp_path / "scenarios.jsonl"
    exported = invoke("scenarios", "export", "--out", str(scenarios))
    assert exported.exit_code == 0, exported.output
    ids = [json.loads(x)["id"] for x in scenarios.read_text().splitlines()]
    assert ids

    with FakeOpenAIServer(Judge()) as judge, FakeOpenAIServer(good_bot) as good, FakeOpenAIServer(bad_bot) as bad:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")

        def simulate(bot: FakeOpenAIServer, name: str) -> Path:
            out = tmp_path / name
            res = invoke("simulate", str(scenarios), "--target", bot.base_url, "--model", "bot", "--out", str(out))
            assert res.exit_code == 0, res.output
            assert f"simulated {len(ids)} of {len(ids)} scenario(s)" in res.stderr and "goal_reached" in res.stderr
            return out

        # 2. the baseline: the current bot, simulated, evaluated over three runs
        baseline = tmp_path / "baseline.json"
        made = invoke("eval", str(simulate(good, "v1.jsonl")), "--runs", "3", "--out", str(baseline))
        assert made.exit_code == 0, made.output
        doc = json.loads(baseline.read_text())
        assert doc["runs"] == 3 and set(doc["verdicts"]) == set(ids)
        assert {"repetition", "task_success", "refusal_loop"} <= set(doc["metrics"])

        # 3. CI on an unchanged bot: simulate, then the gate passes
        same = invoke("eval", str(simulate(good, "v1-again.jsonl")), "--runs", "3", "--baseline", str(baseline))
        assert same.exit_code == 0, same.output
        assert f"gate passed on {len(ids)} threads" in same.stderr

        # 4. CI on a worse bot: the same scenarios, and the gate fails, naming what regressed
        worse = invoke("eval", str(simulate(bad, "v2.jsonl")), "--runs", "3", "--baseline", str(baseline))
    assert worse.exit_code == 1, worse.output
    failed = [line for line in worse.stderr.splitlines() if line.startswith("regression ")]
    assert any(line.startswith("regression repetition: mean ") for line in failed), worse.stderr
    assert any(line.startswith("regression refusal_loop: mean ") for line in failed), worse.stderr
    assert any(
        line.startswith("flipped ") and "passed in all 3 baseline run(s), now fails" in line
        for line in worse.stderr.splitlines()
    )
