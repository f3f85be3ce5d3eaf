"""`simulate`: a scenario's user (the judge model, or the replayed original) against the bot under test.

The bot is an OpenAI-compatible endpoint (the loopback fake, through the real `openai` client) or a
Python callable (`tests.support.sim_bots`); the judge playing the user is another loopback fake.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import REPO
from tests.support.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fakes.schema_judge import SchemaJudge
from tracing_eval.cli import main
from tracing_eval.scenarios import Scenario

PROMPT = "You are the Northwind support bot."


def invoke(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, list(args), catch_exceptions=False)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def scenario(sid: str, goal: str, said: list[str], max_turns: int = 5) -> Scenario:
    transcript: list[dict[str, Any]] = [{"role": "system", "content": "Production prompt."}]
    for text in said:
        transcript += [{"role": "user", "content": text}, {"role": "assistant", "content": "Sorry, I cannot."}]
    return Scenario(
        id=sid,
        goal=goal,
        goal_source="judge",
        criteria=["the user learns the order status"],
        persona="A user who writes short messages.",
        expected_outcome="The user learns the order status.",
        max_turns=max_turns,
        stop_condition="Stop when the user has the status.",
        system_prompt="Production prompt.",
        transcript=transcript,
    )


def write(path: Path, scenarios: list[Scenario]) -> Path:
    path.write_text("".join(s.model_dump_json() + "\n" for s in scenarios))
    return path


class PlayedUser:
    """The judge's answers for `simulated_user` requests: a plan per goal (messages, then a stop)."""

    def __init__(self, plans: dict[str, list[str]]) -> None:
        self.plans = plans
        self.check = SchemaJudge()

    def __call__(self, request: dict[str, Any]) -> Reply:
        instructions = request["messages"][-1]["content"]
        if "connection check" in instructions:
            return self.check(request)
        goal = re.search(r"The user's goal: (.*)", instructions)[1]  # type: ignore[index]
        sent = int(re.search(r"has sent (\d+) of", instructions)[1])  # type: ignore[index]
        plan = self.plans[goal]
        step = plan[sent] if sent < len(plan) else f"message {sent + 1}"
        if step in ("goal_reached", "gave_up"):
            return Reply(json.dumps({"reason": "done", "status": step, "message": ""}))
        return Reply(json.dumps({"reason": "next", "status": "continue", "message": step}))


def bot(request: dict[str, Any]) -> Reply:
    said = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]
    if "explode" in said:
        return Reply.failure(500, "bot crashed")
    return Reply(f"Answer to: {said}", delay=0.02)


@pytest.fixture
def servers(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    plans = {
        "Track order 7": ["Where is order 7?", "Thanks!", "goal_reached"],
        "Cancel order 8": ["Cancel order 8.", "I said cancel it!", "gave_up"],
        "Chat forever": [],
        "Break the bot": ["please explode"],
    }
    with FakeOpenAIServer(PlayedUser(plans)) as judge, FakeOpenAIServer(bot, models=("bot-v2",)) as target:
        monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MAX_RETRIES", "0")
        monkeypatch.setenv("BOT_KEY", "sk-bot")
        yield judge, target


def test_the_judge_plays_the_user_against_an_openai_compatible_bot(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer], tmp_path: Path
) -> None:
    judge, target = servers
    path = write(
        tmp_path / "s.jsonl",
        [
            scenario("scn-a", "Track order 7", ["x"]),
            scenario("scn-b", "Cancel order 8", ["x"]),
            scenario("scn-c", "Chat forever", ["x"], max_turns=3),
        ],
    )
    out = tmp_path / "sim.jsonl"
    args = ["--target", target.base_url, "--model", "bot-v2", "--api-key-env", "BOT_KEY", "--out", str(out)]
    res = invoke("simulate", str(path), *args, "--system-prompt", PROMPT)
    assert res.exit_code == 0, res.output
    assert "simulated 3 of 3 scenario(s) with user judge:judge-test" in res.stderr
    done = {x["thread_id"]: x for x in lines(out)}
    assert list(done) == ["scn-a", "scn-b", "scn-c"]
    a, b, c = done["scn-a"], done["scn-b"], done["scn-c"]
    assert [m["role"] for m in a["turns"]] == ["system", "user", "assistant", "user", "assistant"]
    assert a["turns"][0]["content"] == PROMPT
    assert [m["content"] for m in a["turns"][1:]] == [
        "Where is order 7?",
        "Answer to: Where is order 7?",
        "Thanks!",
        "Answer to: Thanks!",
    ]
    assert a["simulation"] == {
        "stop_reason": "goal_reached",
        "user_turns": 2,
        "user": "judge:judge-test",
        "target": f"bot-v2 at {target.base_url}",
    }
    assert a["scenario_id"] == "scn-a" and a["task_description"] == "Track order 7"
    assert a["success_criteria"] == ["the user learns the order status"]
    assert b["simulation"]["stop_reason"] == "gave_up" and b["simulation"]["user_turns"] == 2
    assert c["simulation"]["stop_reason"] == "turn_limit" and c["simulation"]["user_turns"] == 3
    # the bot got the system prompt first, the whole conversation, its model and key
    bot_calls = target.requests
    assert all(r.body["messages"][0] == {"role": "system", "content": PROMPT} for r in bot_calls)
    assert all(r.body["model"] == "bot-v2" and r.headers["authorization"] == "Bearer sk-bot" for r in bot_calls)
    assert len(bot_calls) == 2 + 2 + 3
    # the simulated user saw the bot's answers, never the bot's system prompt
    user_calls = [r for r in judge.requests if "simulated_user" in json.dumps(r.body.get("response_format"))]
    assert len(user_calls) == 3 + 3 + 3
    assert any("ASSISTANT: Answer to: Where is order 7?" in json.dumps(r.body) for r in user_calls)
    assert not any(PROMPT in json.dumps(r.body) for r in user_calls)
    # the output is eval input
    assert invoke("eval", str(out), "--metrics", "repetition,reask").exit_code == 0


def test_the_replay_user_is_deterministic_against_a_callable(settings: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [scenario("scn-r", "Track order 7", ["Where is 7?", "Still there?"])])
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    for out in (first, second):
        res = invoke(
            "simulate", str(path), "--target", "tests.support.sim_bots:echo", "--user", "replay", "--out", str(out)
        )
        assert res.exit_code == 0, res.output
    assert first.read_bytes() == second.read_bytes()
    [line] = lines(first)
    assert [m["content"] for m in line["turns"]] == [
        "Production prompt.",  # the scenario's own system prompt when none is given
        "Where is 7?",
        "[Production prompt.] You said: Where is 7?",
        "Still there?",
        "[Production prompt.] You said: Still there?",
    ]
    assert line["simulation"]["stop_reason"] == "script_ended" and line["simulation"]["user"] == "replay"
    (tmp_path / "prompt.txt").write_text("New prompt v2")
    res = invoke(
        "simulate", str(path), "--target", "tests.support.sim_bots:echo", "--user", "replay", "--system-prompt",
        f"@{tmp_path / 'prompt.txt'}", "--max-turns", "1",
    )  # fmt: skip
    [line] = [json.loads(x) for x in res.stdout.splitlines()]
    assert [m["content"] for m in line["turns"]] == [
        "New prompt v2",
        "Where is 7?",
        "[New prompt v2] You said: Where is 7?",
    ]
    assert line["simulation"]["stop_reason"] == "turn_limit"


def test_an_async_callable_may_answer_with_tool_calls(settings: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [scenario("scn-t", "Track order 7", ["Where is 7?"])])
    res = invoke("simulate", str(path), "--target", "tests.support.sim_bots:tools", "--user", "replay")
    assert res.exit_code == 0, res.output
    [line] = [json.loads(x) for x in res.stdout.splitlines()]
    assert [m["role"] for m in line["turns"]] == ["system", "user", "assistant", "tool", "assistant"]
    out = tmp_path / "sim.jsonl"
    out.write_text(res.stdout)
    scored = invoke("eval", str(out), "--metrics", "tool_errors", "--format", "jsonl")
    assert json.loads(scored.stdout)["metrics"]["tool_errors"]["passed"] is True


def test_conversations_run_concurrently_within_the_limit(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer], tmp_path: Path, monkeypatch: Any
) -> None:
    judge, target = servers
    monkeypatch.setenv("TRACING_EVAL_JUDGE__MAX_CONCURRENCY", "3")
    path = write(tmp_path / "s.jsonl", [scenario(f"scn-{i}", "Chat forever", ["x"], max_turns=2) for i in range(6)])
    res = invoke("simulate", str(path), "--target", target.base_url, "--model", "bot-v2", "--concurrency", "2")
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 6
    assert 1 <= target.max_in_flight <= 2  # --concurrency conversations at once
    assert judge.max_in_flight <= 3  # the judge client keeps to judge.max_concurrency


def test_a_scenario_the_bot_fails_on_is_reported_and_the_others_are_written(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer], tmp_path: Path
) -> None:
    _, target = servers
    path = write(
        tmp_path / "s.jsonl", [scenario("scn-ok", "Track order 7", ["x"]), scenario("scn-x", "Break the bot", ["x"])]
    )
    out = tmp_path / "sim.jsonl"
    res = invoke("simulate", str(path), "--target", target.base_url, "--model", "bot-v2", "--out", str(out))
    assert res.exit_code == 1
    assert [x["thread_id"] for x in lines(out)] == ["scn-ok"]
    assert "not simulated scn-x: SimulationError: target bot-v2 at" in res.stderr and "bot crashed" in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--target", "no_such_module:bot", "--user", "replay"], 2, "cannot import no_such_module"),
        (["--target", "tests.support.sim_bots:missing", "--user", "replay"], 2, "has no callable 'missing'"),
        (["--target", "http://127.0.0.1:9/v1", "--user", "replay"], 2, "give the model to ask with --model"),
        (
            ["--target", "tests.support.sim_bots:echo", "--user", "replay", "--api-key-env", "NO_SUCH_VAR"],
            2,
            "is not set",
        ),
        (
            ["--target", "tests.support.sim_bots:echo"],
            3,
            "--user judge: the judge model plays the user, and none is configured",
        ),
        (["--target", "tests.support.sim_bots:broken", "--user", "replay"], 1, "raised RuntimeError: the bot is down"),
        (["--target", "tests.support.sim_bots:wrong", "--user", "replay"], 1, "must return a string, a message dict"),
    ],
)
def test_bad_targets_and_users_are_clear_errors(
    settings: Any, tmp_path: Path, monkeypatch: Any, args: list[str], code: int, says: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = write(tmp_path / "s.jsonl", [scenario("scn-1", "Track order 7", ["Where is 7?"])])
    res = invoke("simulate", str(path), *args)
    assert res.exit_code == code, res.output
    assert says in res.stderr


def test_an_unreachable_judge_and_a_file_that_is_not_scenarios(settings: Any, tmp_path: Path, monkeypatch: Any) -> None:
    path = write(tmp_path / "s.jsonl", [scenario("scn-1", "Track order 7", ["Where is 7?"])])
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed.getsockname()[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        monkeypatch.setenv("TRACING_EVAL_JUDGE__MODEL", "judge-test")
        res = invoke("simulate", str(path), "--target", "tests.support.sim_bots:echo")
    assert res.exit_code == 3 and "judge unusable: cannot reach http://127.0.0.1:" in res.stderr
    transcripts = tmp_path / "t.jsonl"
    transcripts.write_text('{"thread_id": "a", "turns": [{"role": "user", "content": "hi"}]}\n')
    res = invoke("simulate", str(transcripts), "--target", "tests.support.sim_bots:echo", "--user", "replay")
    assert res.exit_code == 2 and f"{transcripts} line 1: not a scenario (" in res.stderr


def test_the_offline_example_bot_answers_from_the_order_table(settings: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(REPO)  # the callable is imported from the working folder, as the docs run it
    path = write(tmp_path / "s.jsonl", [scenario("scn-e", "Track order", ["Where is A48213?", "And now?", "Z99999?"])])
    res = invoke("simulate", str(path), "--target", "examples.offline_bot:reply", "--user", "replay")
    assert res.exit_code == 0, res.output
    [line] = [json.loads(x) for x in res.stdout.splitlines()]
    answers = [m["content"] for m in line["turns"] if m["role"] == "assistant" and m["content"]]
    assert answers == ["Order A48213 is shipped.", "Order A48213 is shipped.", "I could not find order Z99999."]
    assert sum(1 for m in line["turns"] if m["role"] == "tool") == 3
