"""OpenAI-style transcripts (the `eval` input) to threads."""

from __future__ import annotations

import json
import random

import pytest

from tests.conftest import DATASETS
from tracing_eval.model import Message, ToolCall
from tracing_eval.transcripts import TranscriptError, thread_from_json_line, thread_from_messages, tool_result_messages


def test_turns_split_at_user_messages_and_positions_point_into_the_input() -> None:
    t = thread_from_messages(
        "t",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]},
            {"role": "user", "content": "cancel A1"},
            {"role": "user", "content": "now"},
            {"role": "assistant", "content": "done", "finish_reason": "length"},
        ],
    )
    assert t.system_prompt == "Be brief."
    assert [[m.position for m in turn.messages] for turn in t.turns] == [[1, 2], [3, 4, 5]]
    assert t.turns[0].assistant_text == "hello"
    assert t.turns[1].user_text == "cancel A1\nnow" and t.turns[1].finish_reason == "length"


def test_tool_results_link_to_the_open_call_even_when_ids_repeat() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 1}'}}
    t = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Error: not found"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
            {"role": "assistant", "content": "found it"},
        ],
    )
    first, second = t.turns[0].tool_calls
    assert (first.arguments, first.failed, second.failed, second.result) == ({"id": 1}, True, False, '{"ok": true}')


def test_inline_tool_calls_of_tau_bench_are_parsed() -> None:
    line = (DATASETS / "tau_airline_gpt4o.jsonl").read_text().splitlines()[0]
    t = thread_from_json_line(line, 1)
    calls = [tc for turn in t.turns for tc in turn.tool_calls]
    assert [c.name for c in calls][:3] == ["get_user_details", "search_direct_flight", "search_onestop_flight"]
    assert all(c.result is not None for c in calls)
    assert [c.name for c in calls if c.failed] == ["book_reservation"]
    assert len(t.messages) == len(json.loads(line)["turns"]) - 1  # everything but the system prompt


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{", "line 7: not valid JSON"),
        ("[1]", "line 7: expected a JSON object"),
        ('{"turns": "no"}', "line 7: 'turns' must be a list"),
        ('{"turns": [{"role": "bot", "content": "x"}]}', "line 7: message 0: role must be one of"),
    ],
)
def test_bad_lines_name_the_line(line: str, needle: str) -> None:
    with pytest.raises(TranscriptError, match=needle):
        thread_from_json_line(line, 7)


def _matched_by_scanning(messages: list[Message]) -> dict[int, Message]:
    """The matching rule read plainly, with a scan of the open calls per result (quadratic when many
    calls stay open): the reference `tool_result_messages` must agree with."""
    answered: dict[int, Message] = {}
    open_calls: list[ToolCall] = []
    for m in messages:
        if m.role == "assistant":
            open_calls += m.tool_calls
        elif m.role == "tool" and open_calls:
            call = next((c for c in open_calls if m.tool_call_id and c.id == m.tool_call_id), None)
            if call is None and not (m.tool_call_id and any(c.id for c in open_calls)):
                call = open_calls[0]
            if call is not None:
                open_calls = [c for c in open_calls if c is not call]
                answered[id(call)] = m
    return answered


def test_tool_results_match_calls_as_the_plain_rule_does() -> None:
    rng = random.Random(3)
    ids = [None, "", "a", "b", "c"]
    for _ in range(3000):
        messages = []
        for _ in range(rng.randint(0, 12)):
            if rng.random() < 0.5:
                calls = [ToolCall(id=rng.choice(ids), name="f") for _ in range(rng.randint(0, 3))]
                messages.append(Message(role="assistant", tool_calls=calls))
            else:
                messages.append(
                    Message(role=rng.choice(["tool", "tool", "user"]), tool_call_id=rng.choice([*ids, "z"]))
                )
        assert tool_result_messages(messages) == _matched_by_scanning(messages)


def test_calls_that_are_never_answered_are_not_scanned_again_for_each_result() -> None:
    """Each turn asks for two tools and records one result, so open calls pile up. A result that
    names its call must not read every call still open (the earlier version did: quadratic)."""
    reads: list[int] = []

    class Counted(ToolCall):
        def __getattribute__(self, name: str) -> object:
            if name == "id":
                reads.append(1)
            return super().__getattribute__(name)

    messages = []
    for k in range(1000):
        calls = [Counted(id=f"x{k}", name="f"), Counted(id=f"y{k}", name="g")]
        messages += [Message(role="assistant", tool_calls=calls), Message(role="tool", tool_call_id=f"y{k}")]
    answered = tool_result_messages(messages)
    assert all(
        answered[id(m.tool_calls[1])] is messages[k + 1] for k, m in enumerate(messages) if m.role == "assistant"
    )
    assert len(answered) == 1000 and len(reads) <= 5 * 2000, len(reads)
