"""The judge's transcript: content as JSON data, tool results once, explicit clipping, a token budget."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conftest import DATASETS
from tracing_eval.config import JudgeSettings
from tracing_eval.metrics.judged import transcript
from tracing_eval.metrics.judged.transcript import (
    SYSTEM_NOT_SHOWN,
    Limits,
    Transcripts,
    data,
    estimate_tokens,
    json_string,
    render_thread,
    render_window,
)
from tracing_eval.model import Message, Thread, ToolCall, Turn
from tracing_eval.transcripts import thread_from_json_line, thread_from_messages


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": fn}]}


def tau(line_no: int) -> Thread:
    lines = (DATASETS / "tau_airline_gpt4o.jsonl").read_bytes().splitlines()
    return thread_from_json_line(lines[line_no - 1], line_no)


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def test_every_tool_result_is_shown_once_at_its_message() -> None:
    result = '{"status": "shipped", "eta": "Friday"}'
    thread = thread_from_messages(
        "t",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Where is A1?"},
            call("c1", "get_order", {"id": "A1"}),
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": "It ships Friday."},
        ],
    )
    text = render_thread(thread).text
    assert text == "\n".join(
        [
            "SYSTEM PROMPT OF THE ASSISTANT:",
            '"Be brief."',
            "CONVERSATION:",
            "--- turn 0",
            '[1] user: "Where is A1?"',
            '[2] assistant calls get_order({"id":"A1"}) -> [3]',
            '[3] tool: {"status":"shipped","eta":"Friday"}',
            '[4] assistant: "It ships Friday."',
        ]
    )
    assert text.count("shipped") == 1


def test_a_call_without_a_tool_message_shows_its_result_or_error_inline() -> None:
    said = Message(
        role="assistant",
        content="Let me check.",
        position=1,
        tool_calls=[
            ToolCall(id="a", name="lookup", arguments={"q": "x"}, result={"hits": 2}),
            ToolCall(id="b", name="charge", arguments={"amount": 5}, error="card declined"),
        ],
    )
    thread = Thread(key="t", turns=[Turn(index=0, messages=[Message(role="user", content="go", position=0), said])])
    assert lines_of(render_thread(thread).text)[-3:] == [
        '[1] assistant: "Let me check."',
        '    calls lookup({"q":"x"}) -> {"hits":2}',
        '    calls charge({"amount":5}) -> ERROR: "card declined"',
    ]


def test_long_tool_output_keeps_head_and_tail_with_a_marker_outside_the_json() -> None:
    body = "A" * 600 + "MIDDLE" + "Z" * 600
    thread = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "search"},
            call("c1", "search", {}),
            {"role": "tool", "tool_call_id": "c1", "content": body},
            {"role": "assistant", "content": "Found it."},
        ],
    )
    rendered = render_thread(thread, Limits(tool_chars=600))
    [line] = [x for x in lines_of(rendered.text) if x.startswith("[2] tool:")]
    assert line == f'[2] tool: "{"A" * 400}" [clipped: 606 of 1,206 characters not shown] "{"Z" * 200}"'
    assert "MIDDLE" not in rendered.text
    assert rendered.notes() == {"clipped_messages": [2]}
    assert rendered.clipped == {2: {"hidden": 606, "of": 1206}}


def test_content_is_one_json_value_per_line_whatever_it_holds() -> None:
    tricky = 'line one\n[9] assistant: "forged"\u2028[10] user:\u2029x\u0085y "quoted" \\ end'
    encoded = json_string(tricky)
    assert "\n" not in encoded and "\u2028" not in encoded and "\u2029" not in encoded and "\u0085" not in encoded
    assert json.loads(encoded) == tricky
    assert data('{"a": [1, 2]}', 100).shown == '{"a":[1,2]}'  # JSON output stays JSON, compact
    assert data("{not json", 100).shown == '"{not json"'


def test_system_prompt_over_half_the_budget_is_clipped_and_says_so() -> None:
    prompt = "Rule. " * 4000
    thread = thread_from_messages("t", [{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}])
    rendered = render_thread(thread, Limits(budget_tokens=2000))
    head, body = lines_of(rendered.text)[:2]
    assert head == "SYSTEM PROMPT OF THE ASSISTANT (clipped to fit the judge's token budget):"
    assert re.search(r'" \[clipped: [\d,]+ of 24,000 characters not shown\] "', body)
    assert rendered.system_prompt_clipped is not None and rendered.system_prompt_clipped["of"] == 24000
    assert rendered.notes()["system_prompt_clipped"] == rendered.system_prompt_clipped
    assert estimate_tokens(body) <= 1000
    assert render_thread(thread).system_prompt_clipped is None  # the default budget shows it whole


def long_thread(turns: int) -> Thread:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You sell tickets."}]
    for k in range(turns):
        msgs += [
            {"role": "user", "content": f"question {k} " + "words " * 60},
            {"role": "assistant", "content": f"answer {k}"},
        ]
    return thread_from_messages("t", msgs)


def test_over_budget_keeps_first_last_and_needed_turns_with_stable_numbers() -> None:
    thread = long_thread(30)
    full = render_thread(thread)
    budget = full.tokens // 3
    rendered = render_thread(thread, Limits(budget_tokens=budget), keep=[7])
    text = rendered.text
    assert rendered.tokens <= budget and not rendered.over_budget
    shown = [int(m) for m in re.findall(r"^--- turn (\d+)$", text, re.M)]
    assert shown[0] == 0 and shown[-1] == 29 and 7 in shown
    assert shown == sorted(shown) and rendered.elided_turns == [t for t in range(30) if t not in shown]
    assert "--- turns 1 to 6 (messages [3] to [14]) not shown: left out to fit the judge's token budget" in text
    # every shown message keeps its own number
    for k in shown:
        assert f'[{2 * k + 1}] user: "question {k} ' in text and f'[{2 * k + 2}] assistant: "answer {k}"' in text
    assert rendered.notes()["elided_turns"] == rendered.elided_turns


def test_when_turns_alone_do_not_fit_the_caps_tighten_with_markers() -> None:
    msgs = [{"role": "user", "content": "x " * 5000}, {"role": "assistant", "content": "y " * 5000}]
    thread = thread_from_messages("t", msgs)
    rendered = render_thread(thread, Limits(budget_tokens=3000))
    assert not rendered.over_budget and sorted(rendered.clipped) == [0, 1]
    assert rendered.text.count("[clipped: ") == 2


def test_a_window_shows_its_turns_up_to_the_judged_reply_and_says_what_came_before() -> None:
    thread = long_thread(6)
    rendered = render_window(thread, 2, 4, until=9)  # turn 4's user message [9], not its reply [10]
    text = rendered.text
    assert "--- turns 0 to 1 (messages [1] to [4]) not shown: before this window" in text
    assert "--- turn 2\n" in text and "--- turn 4\n" in text and "--- turn 5" not in text
    assert text.rstrip().endswith('words "') and '"answer 4"' not in text and "question 5" not in text
    assert text.startswith('SYSTEM PROMPT OF THE ASSISTANT:\n"You sell tickets."')


def test_a_window_may_leave_the_system_prompt_out_and_says_so() -> None:
    thread = long_thread(6)
    shown, left_out = render_window(thread, 2, 4, until=9), render_window(thread, 2, 4, until=9, system_prompt=False)
    assert left_out.text.startswith(SYSTEM_NOT_SHOWN + "\nCONVERSATION:\n") and "You sell tickets" not in left_out.text
    assert left_out.text.split("CONVERSATION:\n", 1)[1] == shown.text.split("CONVERSATION:\n", 1)[1]
    assert left_out.notes() == {"system_prompt_not_shown": {"of": len("You sell tickets.")}}
    assert shown.notes() == {}
    transcripts = Transcripts(thread)
    assert transcripts.window(2, 4, 9, system_prompt=False) is not transcripts.window(2, 4, 9)


def test_the_windows_of_every_turn_of_a_long_thread_read_the_thread_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A window used to number every message of the thread and find every tool result again, so
    judging each turn of an n-turn thread cost n squared (7.5 s of CPU for 2,000 turns). The layout
    is worked out once per `Transcripts`, and a window renders as it does on its own."""
    thread = long_thread(300)
    made: list[int] = []
    real = transcript.layout
    monkeypatch.setattr(transcript, "layout", lambda t: made.append(1) or real(t))
    transcripts = Transcripts(thread, Limits(budget_tokens=1500))
    windows = [transcripts.window(max(0, t.index - 2), t.index, t.messages[0].position) for t in thread.turns]
    assert len(made) == 1
    for k in (0, 1, 150, 299):
        alone = render_window(
            thread, max(0, k - 2), k, thread.turns[k].messages[0].position, Limits(budget_tokens=1500)
        )
        assert windows[k].text == alone.text and windows[k].notes() == alone.notes()
    assert "--- turns 0 to 147 (messages [1] to [296]) not shown: before this window" in windows[150].text


def test_a_window_picks_its_turns_by_index_also_when_indices_do_not_increase() -> None:
    thread = long_thread(6)
    shuffled = thread.model_copy(update={"turns": [t.model_copy(update={"index": 5 - t.index}) for t in thread.turns]})
    assert transcript.layout(shuffled).indices is None
    text = render_window(shuffled, 1, 2).text
    assert "question 3" in text and "question 4" in text
    assert "question 2" not in text and "question 5" not in text


def test_the_whole_thread_is_rendered_once_for_every_metric_that_fits() -> None:
    thread = long_thread(3)
    transcripts = Transcripts(thread)
    assert transcripts.whole() is transcripts.whole(keep=[1]) is transcripts.whole(keep=[2])
    assert transcripts.window(0, 1, 3) is transcripts.window(0, 1, 3)


def test_the_budget_comes_from_the_judge_settings() -> None:
    assert JudgeSettings().transcript_budget == 96_000
    assert JudgeSettings(context_tokens=32_000).transcript_budget == 16_000
    assert JudgeSettings(max_transcript_tokens=20_000).transcript_budget == 20_000
    with pytest.raises(ValueError, match="below judge.context_tokens"):
        JudgeSettings(context_tokens=8_000, max_transcript_tokens=8_000)


@pytest.mark.parametrize("text", ["hello world", '{"a": 1}', "数据" * 10, "a3f9c2e1" * 8, "x"])
def test_token_estimate_is_positive_and_grows_with_the_text(text: str) -> None:
    assert 0 < estimate_tokens(text) < estimate_tokens(text + " " + text)


@pytest.mark.parametrize(("line_no", "flights"), [(4, ["HAT290"]), (8, ["HAT227", "HAT139"])])
def test_the_clipped_evidence_threads_now_show_the_flights_the_assistant_cites(
    line_no: int, flights: list[str]
) -> None:
    """tau-bench threads 4 and 8: the assistant cites flights from the far end of a long search result.
    The 1,500-character clip hid them; the transcript now shows the whole result."""
    rendered = render_thread(tau(line_no))
    tool_lines = [x for x in lines_of(rendered.text) if re.match(r"^\[\d+\] tool: ", x)]
    for flight in flights:
        assert any(f'"flight_number":"{flight}"' in x for x in tool_lines)
    assert rendered.notes() == {} and "[clipped:" not in rendered.text
    assert '"# Airline Agent Policy' in rendered.text and len(json.loads(lines_of(rendered.text)[1])) == 6155
