"""Scenarios written for other tools, and files that grow without duplicates.

- `scenarios`: this project's scenario JSON lines (`simulate` reads them).
- `eval`: the `eval` thread JSON lines: the original transcript under the scenario id, with the goal
  as `task_description` when it was inferred (so `task_success` does not guess it again).
- `deepeval`: a JSON list of DeepEval `ConversationalGolden` rows (`scenario`, `expected_outcome`,
  `user_description`; `name` is the scenario id), as `EvaluationDataset.add_goldens_from_json_file`
  reads them.
- `ragas`: RAGAS `MultiTurnSample` JSON lines (`user_input` as human / ai / tool messages,
  `reference` the expected outcome), as `EvaluationDataset.from_jsonl` reads them; `scenario_id` is
  an extra key RAGAS ignores.

Every row carries the scenario id, so writing into an existing file adds only new scenarios.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tracing_eval.scenarios import Scenario, ScenarioError

Row = dict[str, Any]


def eval_row(s: Scenario) -> Row:
    row: Row = {"thread_id": s.id, "scenario_id": s.id, "turns": s.transcript}
    if s.goal_source != "first_user_message":
        row["task_description"] = s.goal
    if s.criteria:
        row["success_criteria"] = s.criteria
    return row


def deepeval_row(s: Scenario) -> Row:
    return {
        "name": s.id,
        "scenario": s.goal,
        "expected_outcome": s.expected_outcome,
        "user_description": s.persona,
        "comments": "Failed in production: " + "; ".join(f.summary for f in s.failures),
        "additional_metadata": {
            "scenario_id": s.id,
            "max_turns": s.max_turns,
            "stop_condition": s.stop_condition,
            "failures": [f.model_dump(mode="json") for f in s.failures],
            "source": s.source,
            "transcript": s.transcript,
        },
    }


def _tool_args(arguments: Any) -> dict[str, Any]:
    """RAGAS wants tool arguments as an object."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {"raw": arguments}
    return arguments if isinstance(arguments, dict) else {"value": arguments}


def ragas_messages(transcript: list[Row]) -> list[Row]:
    """OpenAI-style messages as RAGAS messages. The system prompt has no RAGAS type and is left out;
    a tool result that does not follow a tool call (RAGAS refuses those) becomes assistant text."""
    out: list[Row] = []
    for m in transcript:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "user":
            out.append({"type": "human", "content": content})
        elif role == "assistant":
            msg: Row = {"type": "ai", "content": content}
            calls = [
                {
                    "name": (tc.get("function") or {}).get("name") or "?",
                    "args": _tool_args((tc.get("function") or {}).get("arguments")),
                }
                for tc in m.get("tool_calls") or []
            ]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            after_call = out and (out[-1]["type"] == "tool" or out[-1].get("tool_calls"))
            out.append(
                {"type": "tool", "content": content}
                if after_call
                else {"type": "ai", "content": f"[tool result] {content}"}
            )
    return out


def ragas_row(s: Scenario) -> Row:
    return {"scenario_id": s.id, "user_input": ragas_messages(s.transcript), "reference": s.expected_outcome}


FORMATS: dict[str, tuple[Callable[[Scenario], Row], str, bool]] = {
    # name: (row builder, key holding the scenario id, whole-file JSON list rather than JSON lines)
    "scenarios": (lambda s: s.model_dump(mode="json"), "id", False),
    "eval": (eval_row, "thread_id", False),
    "deepeval": (deepeval_row, "name", True),
    "ragas": (ragas_row, "scenario_id", False),
}


def _existing(path: Path, key: str, as_list: bool) -> list[Row]:
    if not path.exists() or not path.read_bytes().strip():
        return []
    data = path.read_bytes()
    if as_list:
        try:
            rows = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{path} is not a JSON list ({exc}); write to a new file") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) and key in r for r in rows):
            raise ScenarioError(f"{path} is not a list of objects with {key!r}; write to a new file")
        return rows
    rows = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{path} line {n}: not valid JSON ({exc}); write to a new file") from None
        if not isinstance(row, dict) or key not in row:
            raise ScenarioError(
                f"{path} line {n}: no {key!r}, so it was not written in this format; write to a new file"
            )
        rows.append(row)
    return rows


def render(scenarios: list[Scenario], fmt: str, existing: list[Row] | None = None) -> tuple[bytes, int]:
    """The file content with `scenarios` added to `existing` rows (ids already there are skipped),
    and how many were added."""
    build, key, as_list = FORMATS[fmt]
    rows = list(existing or [])
    seen = {r[key] for r in rows}
    added = 0
    for s in scenarios:
        if s.id not in seen:
            rows.append(build(s))
            seen.add(s.id)
            added += 1
    if as_list:
        return orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n", added
    return b"".join(orjson.dumps(r) + b"\n" for r in rows), added


def merge_into(path: Path, scenarios: list[Scenario], fmt: str) -> tuple[int, int]:
    """Add the scenarios not yet in `path` (written whole, atomically); returns (added, already there)."""
    _, key, as_list = FORMATS[fmt]
    existing = _existing(path, key, as_list)
    content, added = render(scenarios, fmt, existing)
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return added, len(scenarios) - added
