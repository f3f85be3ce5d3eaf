"""Simulation: each scenario's user, played by the judge model (or replayed), against the bot under test.

Targets: an OpenAI-compatible chat endpoint with a system prompt (`ChatTarget`), or a Python callable
`module:function` (`CallableTarget`) that takes the OpenAI-style messages so far (system prompt
first) and returns the reply: a string, a message, or a list of messages (tool calls and results
included); sync or async. Users: `JudgeUser` asks the judge model, through the judge client (its
rate limits, retries and cache), for the user's next message and whether to stop (goal reached, or
giving up); `ReplayUser` says the original user's messages in order and stops when they run out
(deterministic, no model). A conversation ends at the turn limit or when the user stops.

The output is `eval` input: one line per scenario with the scenario id as thread id, the goal as
task description when it was inferred, and how the simulation went.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import openai

from tracing_eval.config import Settings
from tracing_eval.judge import JudgeClient
from tracing_eval.metrics.judged.answers import Answer, Text, one_of
from tracing_eval.metrics.judged.base import Judge, JudgeError, JudgeRequest, MalformedAnswer
from tracing_eval.offline import JudgeUnavailable, check_judge
from tracing_eval.scenarios import Scenario

Message = dict[str, Any]
STATUSES = ("continue", "goal_reached", "gave_up")


class MoveAnswer(Answer):
    """The simulated user's move: why, whether to go on, and the next message."""

    reason: Text
    status: Annotated[str, one_of(STATUSES)]
    message: Text


MOVE_SCHEMA = MoveAnswer.response_schema()
USER_INSTRUCTIONS = """\
TASK: you now play the USER in this conversation with an AI assistant. Do not evaluate it.
The user's goal: {goal}
The user: {persona}
When to stop: {stop}
The user has sent {sent} of at most {limit} messages.

Write the user's next message as this user would: in their voice, one message, only what they would \
say. If the goal has been reached, answer status goal_reached; if this user would give up now, gave_up \
(the message may then be empty). Otherwise status continue with the message.{first}
Answer in JSON: reason (one sentence, why), status, message."""
FIRST_TURN = " The conversation has not started: status must be continue, and the message opens it."


class SimulationError(Exception):
    """A target or user that cannot be used; the message says which and why."""


# -- targets ---------------------------------------------------------------------------------------


class Target(Protocol):
    name: str

    async def reply(self, messages: list[Message]) -> list[Message]:
        """The bot's answer to the conversation so far (system prompt first): one or more messages."""
        ...

    async def aclose(self) -> None: ...


class ChatTarget:
    """A bot behind an OpenAI-compatible chat endpoint, with its system prompt."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.name = f"{model} at {base_url}"
        self.model = model
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout)

    async def reply(self, messages: list[Message]) -> list[Message]:
        try:
            completion = await self.client.chat.completions.create(model=self.model, messages=messages)  # type: ignore[arg-type]  # OpenAI-style dicts; the endpoint checks them
        except openai.OpenAIError as exc:
            raise SimulationError(f"target {self.name}: {type(exc).__name__}: {exc}") from None
        if not completion.choices:
            raise SimulationError(f"target {self.name} answered without a choice")
        message = completion.choices[0].message
        out: Message = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            out["tool_calls"] = [tc.model_dump(exclude_none=True) for tc in message.tool_calls]
        return [out]

    async def aclose(self) -> None:
        await self.client.close()


def _messages_of(value: Any, name: str) -> list[Message]:
    """A callable's answer as messages: a string, a message dict, or a list of message dicts."""
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list) or not items or not all(isinstance(m, dict) for m in items):
        raise SimulationError(
            f"target {name} must return a string, a message dict or a list of them; got {value!r:.80}"
        )
    for m in items:
        if m.get("role") not in ("assistant", "tool"):
            raise SimulationError(f"target {name} returned a message with role {m.get('role')!r} (assistant or tool)")
    return [dict(m) for m in items]


class CallableTarget:
    """A bot in this process: `module:function` taking the messages so far."""

    def __init__(self, spec: str) -> None:
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise SimulationError(f"target {spec!r}: expected module:function (or an http(s) URL)")
        if os.getcwd() not in sys.path:  # like `python -m`: modules of the working folder import
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SimulationError(f"target {spec!r}: cannot import {module_name}: {exc}") from None
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise SimulationError(f"target {spec!r}: {module_name} has no callable {attr!r}")
        self.name = spec
        self.fn: Callable[[list[Message]], Any] = fn

    async def reply(self, messages: list[Message]) -> list[Message]:
        try:
            value = self.fn([dict(m) for m in messages])
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            raise SimulationError(f"target {self.name} raised {type(exc).__name__}: {exc}") from None
        return _messages_of(value, self.name)

    async def aclose(self) -> None:
        return None


def target_from(spec: str, *, model: str | None = None, api_key: str | None = None) -> Target:
    """`http(s)://...` (an OpenAI-compatible base URL; needs `model`) or `module:function`."""
    if spec.startswith(("http://", "https://")):
        if not model:
            raise SimulationError(f"target {spec}: give the model to ask with --model")
        return ChatTarget(spec, model, api_key=api_key)
    return CallableTarget(spec)


# -- users -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """What the user does next: say `text`, or stop (`goal_reached`, `gave_up`, `script_ended`)."""

    text: str = ""
    stop: str | None = None


class User(Protocol):
    name: str

    async def next(self, scenario: Scenario, conversation: list[Message], sent: int, limit: int) -> Move: ...


class ReplayUser:
    """Says the original user's messages in order: deterministic, no model."""

    name = "replay"

    async def next(self, scenario: Scenario, conversation: list[Message], sent: int, limit: int) -> Move:
        said = scenario.user_messages
        return Move(said[sent]) if sent < len(said) else Move(stop="script_ended")


def render_conversation(conversation: list[Message]) -> str:
    """What the simulated user sees: who said what (tool traffic as one line per call)."""
    if not conversation:
        return "CONVERSATION: (not started yet)"
    lines = ["CONVERSATION:"]
    for m in conversation:
        if m["role"] == "user":
            lines.append(f"USER: {m.get('content') or ''}")
        elif m["role"] == "assistant":
            if m.get("content"):
                lines.append(f"ASSISTANT: {m['content']}")
            for tc in m.get("tool_calls") or []:
                lines.append(f"(the assistant used a tool: {(tc.get('function') or {}).get('name', '?')})")
    return "\n".join(lines)


def parse_move(first: bool) -> Callable[[Any], Move]:
    read = MoveAnswer.parser()

    def parse(data: Any) -> Move:
        answer = read(data)
        status, message = answer.status, answer.message
        if status == "continue" or first:
            if not message:
                raise MalformedAnswer("'message' must hold the user's next message")
            return Move(message)
        return Move(stop=status)

    return parse


class JudgeUser:
    """The judge model plays the user, one structured answer per user message."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.name = f"judge:{judge.model}"

    async def next(self, scenario: Scenario, conversation: list[Message], sent: int, limit: int) -> Move:
        instructions = USER_INSTRUCTIONS.format(
            goal=scenario.goal,
            persona=scenario.persona,
            stop=scenario.stop_condition,
            sent=sent,
            limit=limit,
            first=FIRST_TURN if sent == 0 else "",
        )
        request = JudgeRequest(
            "simulated_user", render_conversation(conversation), instructions, MOVE_SCHEMA, scenario.id
        )
        move, _ = await self.judge.ask(request, parse_move(sent == 0))
        return move


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Simulated:
    """One scenario's simulated conversation, or why it could not be simulated."""

    scenario: Scenario
    messages: list[Message]
    stop_reason: str = "turn_limit"
    error: str | None = None

    def eval_line(self, user: str, target: str) -> dict[str, Any]:
        s = self.scenario
        line: dict[str, Any] = {"thread_id": s.id, "scenario_id": s.id, "turns": self.messages}
        if s.goal_source != "first_user_message":
            line["task_description"] = s.goal
        if s.criteria:
            line["success_criteria"] = s.criteria
        user_turns = sum(1 for m in self.messages if m["role"] == "user")
        line["simulation"] = {"stop_reason": self.stop_reason, "user_turns": user_turns, "user": user, "target": target}
        return line


async def simulate_one(
    scenario: Scenario, user: User, target: Target, *, system_prompt: str | None = None, max_turns: int | None = None
) -> Simulated:
    """Play the scenario to its turn limit or until the user stops."""
    prompt = system_prompt if system_prompt is not None else scenario.system_prompt
    head: list[Message] = [{"role": "system", "content": prompt}] if prompt else []
    conversation: list[Message] = []
    limit = max_turns or scenario.max_turns
    try:
        for sent in range(limit):
            move = await user.next(scenario, conversation, sent, limit)
            if move.stop is not None and (sent > 0 or not move.text):
                return Simulated(scenario, head + conversation, move.stop)
            conversation.append({"role": "user", "content": move.text})
            conversation += await target.reply(head + conversation)
    except (SimulationError, JudgeError) as exc:
        return Simulated(scenario, head + conversation, "error", f"{type(exc).__name__}: {exc}")
    return Simulated(scenario, head + conversation)


async def simulate_all(
    scenarios: list[Scenario],
    user: User,
    target: Target,
    *,
    concurrency: int,
    system_prompt: str | None = None,
    max_turns: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> list[Simulated]:
    """Every scenario, `concurrency` at a time (the judge client paces its own calls), in input order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(s: Scenario) -> Simulated:
        async with gate:
            done = await simulate_one(s, user, target, system_prompt=system_prompt, max_turns=max_turns)
        if on_done is not None:
            on_done()
        return done

    return list(await asyncio.gather(*(one(s) for s in scenarios)))


async def run_simulation(
    settings: Settings,
    scenarios: list[Scenario],
    target: Target,
    user_kind: str,
    *,
    system_prompt: str | None = None,
    max_turns: int | None = None,
    concurrency: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> tuple[list[Simulated], str]:
    """`simulate_all` with the user `user_kind` names (`judge`: checked with one call first, failing
    fast; `replay`), closing the target and the judge. Raises JudgeUnavailable."""
    judge: JudgeClient | None = None
    try:
        if user_kind == "judge":
            if not settings.judge.enabled:
                raise JudgeUnavailable(
                    "--user judge: the judge model plays the user, and none is configured "
                    "(set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY, or use --user replay)"
                )
            judge = JudgeClient(settings.judge, fail_fast=True)
            await check_judge(judge)
        user: User = JudgeUser(judge) if judge is not None else ReplayUser()
        done = await simulate_all(
            scenarios,
            user,
            target,
            concurrency=concurrency or settings.judge.max_concurrency,
            system_prompt=system_prompt,
            max_turns=max_turns,
            on_done=on_done,
        )
        return done, user.name
    finally:
        await target.aclose()
        if judge is not None:
            await judge.close()
