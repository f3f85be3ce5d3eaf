"""Report content the conventions could not read: count it once per trace, log an empty thread once.

A trace whose spans yield no turn, or a turn whose answer no convention could read, usually means
an instrumentation this version does not know. Each is counted once per trace in
`tracing_eval_unreadable_spans_total{reason}` (by the spans looked at), and a thread with spans
but no turn at all is logged once with the attribute names it had, so the gap is visible without
reading the store (`tracing-eval inspect` shows the spans).
"""

from __future__ import annotations

from collections import OrderedDict

import structlog

from tracing_eval.model import Thread, Unreadable
from tracing_eval.telemetry import Telemetry

log = structlog.get_logger(__name__)

#: how many traces and threads are remembered as already reported (the oldest are forgotten first)
REMEMBERED = 100_000


class UnreadableReport:
    """What was reported already, so re-evaluating a thread neither counts nor logs it again."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remembered = remembered

    def _first_time(self, key: str) -> bool:
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self._remembered:
            self._seen.popitem(last=False)
        return True

    def observe(self, thread: Thread, telemetry: Telemetry | None) -> None:
        found: list[Unreadable] = [*thread.unreadable]
        found += [t.answer_unknown for t in thread.turns if t.answer_unknown is not None]
        for item in found:
            if self._first_time(f"{item.reason}|{item.trace_id}|{item.span_id}") and telemetry is not None:
                telemetry.unreadable_spans.labels(item.reason).inc(item.spans)
        if thread.unreadable and not thread.turns and self._first_time(f"thread|{thread.key}"):
            log.warning(
                "spans but no turn could be read; see `tracing-eval inspect --thread`",
                thread_key=thread.key,
                traces=len(thread.unreadable),
                attributes=sorted({a for u in thread.unreadable for a in u.attributes}),
            )
