"""Cheap substring gates before slow case-insensitive patterns (`tracing_eval.text.could_match`):
a gate must let through every text its pattern matches."""

import re

import pytest

from tracing_eval.metrics.deterministic import friction_cues as cues
from tracing_eval.metrics.deterministic import slots
from tracing_eval.text import Folded, alternatives, could_match

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
    *((s.asked_as, s.asked_needs) for s in slots.SLOTS),
]


@pytest.mark.parametrize(("pattern", "needs"), GATED)
def test_every_cue_alternative_names_one_of_its_gate_pieces(pattern: re.Pattern[str], needs: tuple[str, ...]) -> None:
    """The cheap gates skip a pattern when no piece is in the text: an alternative added to a pattern
    without a piece in its gate would be skipped silently."""
    alts = alternatives(pattern.pattern)
    assert alts
    unguarded = [a for a in alts if not any(n.replace("'", "'?") in a or n in a for n in needs)]
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
        ("Who am I speaking with?", slots.SLOT_BY_NAME["name"].asked_as, slots.SLOT_NAME_NEEDS),
        ("And for HOW MANY PEOPLE?", slots.SLOT_BY_NAME["party_size"].asked_as, slots.SLOT_NAME_NEEDS),
    ],
)
def test_cue_gates_let_every_match_through(text: str, pattern: re.Pattern[str], needs: tuple[str, ...]) -> None:
    assert pattern.search(text)
    assert could_match(text, needs)


def test_cue_gates_skip_only_ascii_text_without_their_pieces() -> None:
    assert not could_match("Where is my parcel?", cues.HUMAN_NEEDS)
    assert could_match("Où est mon colis ?", cues.HUMAN_NEEDS)  # non-ASCII: always read


def _group_end(source: str, start: int) -> int:
    """The index just after the group whose "(" is at `start`."""
    depth, k = 1, start + 1
    while depth:
        depth += {"(": 1, ")": -1}.get(source[k], 0)
        k += 1
    return k


def _leading_words(source: str) -> list[str]:
    """The keywords a keyed value pattern opens with: `\\b(?:order|pedido|...)` or `\\btracking`; or,
    for a value before its keyword (`\\b(<count>)\\s+(?:people|...)`), the keywords after the value."""
    source = source.removeprefix("\\b")
    if source.startswith("(") and not source.startswith("(?"):
        source = source[_group_end(source, 0) :].removeprefix("\\s+")
    if not source.startswith("(?"):
        return [re.match(r"\w+", source).group(0)]  # type: ignore[union-attr]
    start = source.index(":") + 1
    return alternatives(source[start : _group_end(source, start - 3) - 1])


def _ascii_spelling(word: str) -> str:
    """A keyword as ASCII text can spell it: groups and repeats dropped, a class by its ASCII letter."""
    word = re.sub(r"\\s[*+]|\\w\*|\(\?:|\)\??|-\?", "", word)
    return re.sub(r"\[([^\]]*)\]", lambda m: next(ch for ch in m.group(1) if ch.isascii()), word)


@pytest.mark.parametrize("slot", [s for s in slots.SLOTS if s.keyed], ids=lambda s: s.name)
def test_every_keyword_of_a_keyed_value_pattern_holds_one_of_its_gate_pieces(slot: slots.Slot) -> None:
    """`values_in` skips a slot's keyed patterns on ASCII text without one of its `keyed_needs`."""
    assert slot.keyed_needs
    for pattern in slot.keyed:
        spellings = [_ascii_spelling(w) for w in _leading_words(pattern.pattern)]
        assert [w for w in spellings if not any(n in w for n in slot.keyed_needs)] == [], spellings


def test_values_in_gates_let_every_value_through() -> None:
    """The gates of `values_in` skip patterns, never values: each kind of value is still found."""
    found = dict(
        slots.values_in(
            "My order number is W1234567. Email me at ann@example.com or call 415-555-0123. "
            "My ZIP code is 94110, user id ann_lee_42, account number AC-99812. "
            "Reservation ZX4K9P on March 3, 2024. Tracking number 1Z999AA10123456784. My name is Ann Lee."
        )
    )
    assert found == {
        "order_number": "W1234567",
        "email": "ann@example.com",
        "phone": "415-555-0123",
        "zip": "94110",
        "user_id": "ann_lee_42",
        "account_id": "AC-99812",
        "reservation_id": "ZX4K9P",
        "date": "March 3, 2024",
        "tracking_number": "1Z999AA10123456784",
        "name": "Ann Lee",
    }


CUES = [value for value in vars(cues).values() if isinstance(value, cues.Cue)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no",
        "No, wrong!",
        "Nope, still doesn't work",
        "Still the same error. That's not right, I never said that.",
        "Ugh, not again!! You're useless",
        "I am so stupid, sorry. Is there a human I can talk to?",
        "Hello?? are you there",
        "Non, ce n'est pas ça. NO, WRONG, I SAID FRIDAY",
        "İ said no, thanks",
    ],
)
def test_a_cue_matches_as_its_whole_pattern_does(text: str) -> None:
    """`Cue` skips its `^` alternatives after the start: the same match, at the same span."""
    assert CUES
    for cue in CUES:
        whole = Folded(cue.pattern)
        for got, want in ((cue.search(text), whole.search(text)), (cue.search(text, 3), whole.search(text, 3))):
            assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups()))
