"""Human scores from Langfuse next to this project's scores on the same traces and sessions.

Reviewers' scores are those whose source is `ANNOTATION` (the annotation queue and the score
buttons in the UI). They are read with `GET /v3/scores` since a time, grouped by subject (a session,
or a trace; an observation's score counts for its trace), and this project's score of the metric is
read for the same subjects, in batches of ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracing_eval.connectors.langfuse.client import LangfuseClient
from tracing_eval.connectors.langfuse.configs import score_name

#: subject ids per read of our scores (comma-separated in the query string)
BATCH = 50


@dataclass
class Subject:
    """One trace or session with the reviewers' values and this project's score (None when absent)."""

    kind: str  # "trace" | "session"
    id: str
    human: list[Any]
    ours: dict[str, Any] | None = None


def _subject(row: dict[str, Any]) -> tuple[str, str] | None:
    s = row.get("subject") or {}
    if s.get("kind") == "session":
        return "session", s["id"]
    if s.get("kind") == "trace":
        return "trace", s["id"]
    if s.get("kind") == "observation" and s.get("traceId"):
        return "trace", s["traceId"]
    return None


def human_value(row: dict[str, Any]) -> Any:
    """A reviewer's value: the category name, True/False, or the number."""
    value = row.get("value")
    if row.get("dataType") == "BOOLEAN" and isinstance(value, int | float):
        return bool(value)
    return value


def our_result(row: dict[str, Any]) -> dict[str, Any]:
    """This project's score row as an `eval` result (score, label, passed, status, evidence), from its
    metadata, falling back on the value."""
    meta = row.get("metadata") or {}
    value = row.get("value")
    numeric = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    return {
        "score": meta.get("score", numeric),
        "label": meta.get("label", value if isinstance(value, str) else None),
        "passed": meta.get("passed"),
        "status": meta.get("status", "ok"),
        "evidence": meta.get("evidence") if isinstance(meta.get("evidence"), dict) else {},
    }


def _newest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return max(rows, key=lambda r: str(r.get("timestamp") or ""))


async def human_and_ours(client: LangfuseClient, human_name: str, metric: str, since: datetime) -> list[Subject]:
    """Every subject a reviewer scored as `human_name` since `since`, with our `metric` score on it."""
    rows = await client.scores(
        {"name": human_name, "source": "ANNOTATION", "fromTimestamp": since.isoformat().replace("+00:00", "Z")}
    )
    subjects: dict[tuple[str, str], Subject] = {}
    for row in rows:
        key = _subject(row)
        if key is not None:
            subjects.setdefault(key, Subject(key[0], key[1], [])).human.append(human_value(row))
    ours_name = score_name(metric)
    for kind, param in (("trace", "traceId"), ("session", "sessionId")):
        ids = [s.id for s in subjects.values() if s.kind == kind]
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            found = await client.scores({"name": ours_name, param: ",".join(batch)})
            by_id: dict[str, list[dict[str, Any]]] = {}
            for row in found:
                if row.get("source") == "ANNOTATION":
                    continue
                key = _subject(row)
                if key is not None and key[0] == kind:
                    by_id.setdefault(key[1], []).append(row)
            for sid, got in by_id.items():
                if (kind, sid) in subjects:
                    subjects[(kind, sid)].ours = our_result(_newest(got))
    return list(subjects.values())
