"""Cheap substring gates before slow case-insensitive patterns (`tracing_eval.text.could_match`):
a gate must let through every text its pattern matches."""

import re

import pytest

from tracing_eval.metrics.deterministic import friction_cues as cues
from tracing_eval.metrics.deterministic import slots
from tracing_eval.text import could_match


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regex source (split at `|` outside groups and classes)."""
    out, depth, in_class, start, k = [], 0, False, 0, 0
    while k < len(pattern):
        ch = pattern[k]
        if ch == "\\":
            k += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(pattern[start:k])
            start = k + 1
        k += 1
    return [*out, pattern[start:]]


GATED = [
    (cues.DISPUTE, cues.DISPUTE_NEEDS),
    (cues.REMINDER, cues.REMINDER_NEEDS),
    (cues.RETRY, cues.RETRY_NEEDS),
    (cues.ANNOYANCE, cues.ANNOYANCE_NEEDS),
    (cues.HUMAN, cues.HUMAN_NEEDS),
    (slots.NOT_FOUND, slots.NOT_FOUND_NEEDS),
    (slots.USER_CORRECTION, slots.USER_CORRECTION_NEEDS),
    (slots.USER_RETRACTION, slots.USER_RETRACTION_NEEDS),
    *((s.asked_as, slots.SLOT_NAME_NEEDS) for s in slots.SLOTS),
]


@pytest.mark.parametrize(("pattern", "needs"), GATED)
def test_every_cue_alternative_names_one_of_its_gate_pieces(pattern: re.Pattern[str], needs: tuple[str, ...]) -> None:
    """The cheap gates skip a pattern when no piece is in the text: an alternative added to a pattern
    without a piece in its gate would be skipped silently."""
    alternatives = _alternatives(pattern.pattern)
    assert alternatives
    unguarded = [a for a in alternatives if not any(n.replace("'", "'?") in a or n in a for n in needs)]
    assert unguarded == []


@pytest.mark.parametrize(
    ("text", "pattern", "needs"),
    [
        ("I want to speak to a HUMAN", cues.HUMAN, cues.HUMAN_NEEDS),
        ("Representative please!", cues.HUMAN, cues.HUMAN_NEEDS),
        ("THAT IS NOT RIGHT", cues.DISPUTE, cues.DISPUTE_NEEDS),
        ("Are you sure?", cues.DISPUTE, cues.DISPUTE_NEEDS),
        ("I already told you that", cues.REMINDER, cues.REMINDER_NEEDS),
        ("For the third time, the date is Friday", cues.REMINDER, cues.REMINDER_NEEDS),
        ("Please double-check", cues.RETRY, cues.RETRY_NEEDS),
        ("Could you look it up again", cues.RETRY, cues.RETRY_NEEDS),
        ("You're not listening", cues.ANNOYANCE, cues.ANNOYANCE_NEEDS),
        ("I give up", cues.ANNOYANCE, cues.ANNOYANCE_NEEDS),
        ("Sorry, that ORDER could not be found.", slots.NOT_FOUND, slots.NOT_FOUND_NEEDS),
        ("Oops, typo", slots.USER_CORRECTION, slots.USER_CORRECTION_NEEDS),
        ("I don't remember it", slots.USER_RETRACTION, slots.USER_RETRACTION_NEEDS),
        ("What is your E-MAIL?", slots.SLOTS[1].asked_as, slots.SLOT_NAME_NEEDS),
        ("Who am I speaking with?", slots.SLOTS[-1].asked_as, slots.SLOT_NAME_NEEDS),
    ],
)
def test_cue_gates_let_every_match_through(text: str, pattern: re.Pattern[str], needs: tuple[str, ...]) -> None:
    assert pattern.search(text)
    assert could_match(text, needs)


def test_cue_gates_skip_only_ascii_text_without_their_pieces() -> None:
    assert not could_match("Where is my parcel?", cues.HUMAN_NEEDS)
    assert could_match("Où est mon colis ?", cues.HUMAN_NEEDS)  # non-ASCII: always read
