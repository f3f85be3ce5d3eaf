"""Text helpers: `Folded` patterns match exactly what their case-insensitive form matches."""

import random
import re

import pytest

from tracing_eval.metrics.deterministic import (
    friction_cues,
    refusal_loop,
    response_hygiene,
    slots,
    thread_stats,
    tool_errors,
)
from tracing_eval.text import (
    ASCII_ALNUM,
    Folded,
    alternatives,
    ascii_runs,
    factor_boundaries,
    script_of,
    sentence_words,
    split_sentences,
)

FOLDED = [
    value
    for module in (friction_cues, refusal_loop, response_hygiene, slots, thread_stats, tool_errors)
    for value in vars(module).values()
    if isinstance(value, Folded)
] + [p for s in slots.SLOTS for p in (s.asked_as, s.other, s.asked_as_elsewhere) if p is not None]

SAMPLES = [
    "I'm sorry, but I CAN'T HELP with that.",
    "I can't help you with that request.",
    "Could you please provide your ORDER NUMBER?",
    "What's your e-mail? Your Reservation ID is ABC123.",
    "Your booking has been CANCELLED successfully.",
    "No record found for that Order #W1234567.",
    "THANK YOU, BYE",
    "###STOP###",
    "Je ne peux pas vous aider. Il n'est pas approprié de répondre.",
    "Lo siento, pero no puedo procesar la devolución.",
    "Ich kann Ihnen leider nicht helfen; das ist nicht möglich.",
    "Not found: INVALID user id, wrong date of birth.",
    "I DON'T HAVE the reservation number, it was a typo",
    "No, that's WRONG. I already told you: THAT IS NOT what I asked, try again please!",
    "Are you sure? Can you check it again? I want to speak to a human agent.",
    "What is your user id? And also, which date? I'll need your ZIP code.",
    "Kelvin \u212a and long \u017f and dotless \u0131 and \u0130stanbul: not ASCII",
]


def _words(rng: random.Random) -> str:
    vocab = " ".join(SAMPLES).split()
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 25)))


@pytest.mark.parametrize("pattern", FOLDED, ids=lambda p: p.pattern[:40])
def test_folded_matches_like_the_case_insensitive_pattern(pattern: Folded) -> None:
    reference = re.compile(pattern.pattern, re.IGNORECASE)
    rng = random.Random(7)
    texts = SAMPLES + [t.upper() for t in SAMPLES] + [_words(rng) for _ in range(300)]
    for text in texts:
        want = [m.span() for m in reference.finditer(text)]
        assert [m.span() for m in pattern.finditer(text)] == want, text
        assert bool(pattern.search(text)) == bool(want), text
        assert bool(pattern.match(text)) == bool(reference.match(text)), text


@pytest.mark.parametrize(
    ("source", "factored"),
    [
        (r"\bfoo|\bbar|^baz|\bqux", r"\b(?:foo|bar)|^baz|\bqux"),
        (r"\ba[|\]]b|\b(c|d)e|f", r"\b(?:a[|\]]b|(c|d)e)|f"),
        (r"^x|\by|[]|]z", r"^x|\by|[]|]z"),  # nothing to factor
        (r"\b(?:a|b)\b", r"\b(?:a|b)\b"),
        (r"(?:\ba|\bb)|(?:\bc)|(?:x)y", r"\b(?:a|b|c)|(?:x)y"),  # whole-alternative groups are opened
    ],
)
def test_factor_boundaries_takes_the_leading_boundary_out_of_consecutive_alternatives(
    source: str, factored: str
) -> None:
    assert factor_boundaries(source) == factored
    assert "|".join(alternatives(source)) == source
    assert re.compile(factored).groups == re.compile(source).groups


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (r"\bStop\b", "upper-case letter"),
        (r"[A-Z]{3}", "upper-case letter"),
        (r"(?-i:abc)", "case-sensitive group"),
        ("\u017fome", "folds to an ASCII letter"),
        ("[\u0100-\u0200]x", "range"),
        (r"\u00e9t\u00e9", "by code"),
    ],
)
def test_a_pattern_that_lower_casing_would_change_is_refused(source: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Folded(source)


def test_script_of_counts_ascii_letters() -> None:
    assert script_of("abc def ghi jkl") == "LATIN"
    assert script_of("12345 678 90 ab!") is None
    assert script_of("a1b2c3d4e5f6", min_letters=6) == "LATIN"
    assert script_of("a1b2c3d4e5f6", min_letters=7) is None


@pytest.mark.parametrize(
    "text",
    [
        "a.\n.\nb",
        "! . x",
        "Hi.  There?\n\nYes!\n",
        ". x",
        "x.",
        "\n\n",
        "a?!  b",
        "e.g. the end",
        "Mail me at a.b@example.com. Thanks!",
        "Costs 3.50 today.\u2003Next",
        "?\n!\n",
        "",
    ],
)
def test_split_sentences_splits_where_the_look_behind_pattern_does(text: str) -> None:
    want = [s.strip() for s in re.split(r"(?<=[.?!])\s+|\n+", text) if s and s.strip()]
    assert split_sentences(text) == want


def _ascii_samples(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = [chr(c) for c in range(128)] + ["?!", "...", "a?b", "1!x", "\n\n"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(n)]


def test_ascii_runs_split_like_the_character_class_pattern() -> None:
    letters = ascii_runs("abcdefghijklmnopqrstuvwxyz")
    for text in _ascii_samples(2000, 5):
        assert text.translate(letters).split() == re.findall(r"[a-z]+", text)
        assert text.translate(ASCII_ALNUM).split() == re.findall(r"[a-z0-9]+", text)


def test_sentence_words_ends_where_the_look_behind_first_pattern_does() -> None:
    """The sentence marks look behind after themselves; the same ends as looking behind first."""
    piece = re.compile(r"[a-z0-9]+|(?<![.!?])[.!?]++(?=\s|$)|(?<=[a-z])[?!]++(?=[a-z])|\n")
    for text in _ascii_samples(2000, 6):
        text = text.replace("'", " ")  # no apostrophes to drop
        want: list[list[str]] = [[]]
        for p in piece.findall(text.lower()):
            if p[0] in ".!?\n":
                want.append([])
            else:
                want[-1].append(p)
        assert sentence_words(text) == [ws for ws in want if ws], text
