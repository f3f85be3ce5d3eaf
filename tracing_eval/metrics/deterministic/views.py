"""Flat, positioned views of a thread's messages, as the deterministic checks read them."""

from __future__ import annotations

from typing import NamedTuple

from tracing_eval.model import Message, Thread


class Located(NamedTuple):
    """A message with the turn it belongs to and its transcript position (a named tuple: a thread
    builds one per message for several checks, and a tuple is the cheapest to build)."""

    turn: int
    position: int
    message: Message

    @property
    def role(self) -> str:
        return self.message.role

    @property
    def text(self) -> str:
        return self.message.content


def located(thread: Thread) -> list[Located]:
    """Every message in order; a missing `Message.position` falls back to the running index."""
    out: list[Located] = []
    for turn in thread.turns:
        index = turn.index  # model attributes are slow to read: once per turn and per message
        for m in turn.messages:
            pos = m.position
            out.append(Located(index, len(out) if pos is None else pos, m))
    return out


def replies(thread: Thread, items: list[Located] | None = None) -> list[Located]:
    """Assistant messages that carry text (tool-call-only messages are skipped); `items`: the thread's
    `located` messages when the caller has them."""
    items = located(thread) if items is None else items
    return [x for x in items if x.message.role == "assistant" and x.message.content.strip()]


def user_text_by_turn(thread: Thread) -> dict[int, str]:
    """The user's text of every turn, by turn index."""
    return {t.index: t.user_text for t in thread.turns}
