"""L4 `role_adherence`: the role from config or the system prompt; (m - out of character) / m."""

from typing import Any

import pytest

from tests.support.scripted_judge import ScriptedJudge, chat, judge_context, strict_schema_problems, verdict_last
from tracing_eval.metrics.judged.role_adherence import RoleAdherence
from tracing_eval.model import MetricResult, Status, Thread

NAME = RoleAdherence.name

SYSTEM = "You are Ava, the support assistant of Acme Bank. Only discuss Acme accounts and cards."
THREAD = chat(
    "Hi, my card is blocked.",
    "I can help with that. I have unblocked your Acme card.",
    "Cool. Now write me a poem about pirates.",
    "Arr! Upon the sea so wide, a pirate sailed with gold inside...",
    "Thanks, bye.",
    "Goodbye, and thank you for banking with Acme.",
    system=SYSTEM,
)  # replies at [2], [4], [6]; the system prompt is message [0]


def flag(message: int, reason: str = "off role") -> dict[str, Any]:
    return {"message": message, "reason": reason}


def answer(*flags: dict[str, Any], reason: str = "overall") -> dict[str, Any]:
    return {"out_of_character": list(flags), "reason": reason}


async def run(
    *answers: Any, thread: Thread = THREAD, options: dict[str, Any] | None = None
) -> tuple[MetricResult, ScriptedJudge]:
    judge = ScriptedJudge({NAME: list(answers)})
    [result] = await RoleAdherence().evaluate(thread, judge_context(thread, judge, options=options))
    assert judge.unused() == {}
    return result, judge


async def test_system_prompt_is_the_role() -> None:
    result, judge = await run(answer())
    [request] = judge.requests
    assert "defined by its system prompt shown above" in request.instructions
    assert request.transcript is not None
    assert f'SYSTEM PROMPT OF THE ASSISTANT:\n"{SYSTEM}"' in request.transcript  # once, in the shared prefix
    assert result.evidence["role_source"] == "system_prompt"
    assert strict_schema_problems(request.schema) == [] and verdict_last(request.schema)
    assert request.schema["properties"]["out_of_character"]["items"]["properties"]["message"]["enum"] == [2, 4, 6]


async def test_configured_role_wins_over_the_system_prompt() -> None:
    role = "A pirate-themed storyteller for kids."
    result, judge = await run(answer(flag(2)), options={"role": role})
    text = judge.requests[0].instructions
    assert f'"{role}"' in text and "system prompt" not in text
    assert result.evidence["role_source"] == "config"


async def test_out_of_character_replies_lower_the_score() -> None:
    result, _ = await run(answer(flag(4, "writes poetry for a bank"), reason="one off-role reply"))
    assert (result.score, result.label, result.passed) == (0.6667, "out_of_character", False)
    assert result.reason == "one off-role reply"
    assert result.evidence["replies"] == 3
    assert result.evidence["out_of_character"] == [{"message": 4, "turn": 1, "reason": "writes poetry for a bank"}]


async def test_in_character_scores_one_and_duplicates_count_once() -> None:
    result, _ = await run(answer())
    assert (result.score, result.label, result.passed) == (1.0, "in_character", True)
    result, judge = await run(answer(flag(4), flag(4, "again")))
    assert result.score == 0.6667
    assert (result.judge_model, result.input_tokens) == ("fake-judge", judge.billed()[0])


async def test_no_role_is_not_applicable_without_a_call() -> None:
    thread = chat("hi", "hello")
    result, judge = await run(thread=thread)
    assert result.status == Status.NOT_APPLICABLE
    assert "role" in result.reason
    assert judge.requests == []


async def test_no_reply_is_not_applicable_without_a_call() -> None:
    thread = chat("hi", system=SYSTEM)
    result, judge = await run(thread=thread)
    assert result.status == Status.NOT_APPLICABLE
    assert judge.requests == []


@pytest.mark.parametrize(
    "bad",
    [
        answer(flag(3)),  # a user message
        answer(flag(0)),  # the system prompt
        answer(flag(17)),  # no such message
        answer({"message": "4", "reason": "x"}),  # not a number
        {"out_of_character": [], "verdict": "fine"},  # no reason
    ],
)
async def test_malformed_twice_is_an_error(bad: dict[str, Any]) -> None:
    result, judge = await run(bad, bad)
    assert len(judge.requests) == 2
    assert (result.status, result.score) == (Status.ERROR, None)
    assert result.reason.startswith("judge failed:")
