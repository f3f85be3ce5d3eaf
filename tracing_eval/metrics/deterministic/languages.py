"""Which texts a lexicon-based check can read: script, foreign letters and function words (stdlib only).

A check that matches phrases in a few languages must not read silence into text in another one:
`uncovered_language(text, covered)` says why a text is out of reach (another script, letters no
covered language uses, or function words of another language), or None when it is readable or too
short to tell. It is a cheap gate, not a language identifier.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from tracing_eval.metrics.deterministic import lexicons
from tracing_eval.text import script_of

#: Latin-script text needs this many words before function words can tell its language
MIN_WORDS = 6
#: share of Latin letters with diacritics that no covered language uses ("ł", "ş", "ő", "ả")
FOREIGN_LETTER_SHARE = 0.02
#: characters of a text read to tell its language
SAMPLE_CHARS = 240
_WORD = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=16)
def _vocabularies(covered: frozenset[str]) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Function words of the covered languages, and of every other language we can recognise."""
    known = {**lexicons.LANGUAGE_WORDS, **lexicons.OTHER_LANGUAGE_WORDS}
    known["en"] = known["en"] | lexicons.STOP_WORDS
    inside = frozenset().union(*(known[lang] for lang in covered if lang in known))
    outside = {lang: words - inside for lang, words in known.items() if lang not in covered}
    return inside, outside


def words(text: str) -> list[str]:
    """The lower-cased words of the first `SAMPLE_CHARS` characters: enough to tell a language."""
    return _WORD.findall(text[:SAMPLE_CHARS].lower())


def uncovered_language(text: str, covered: Iterable[str], *, words_: list[str] | None = None) -> str | None:
    """Why a check for the `covered` languages cannot read `text`, or None when it can (or cannot tell).

    Reads the first `SAMPLE_CHARS` characters; `words_` passes words a caller already has.
    """
    sample = text[:SAMPLE_CHARS]
    if not sample.isascii():
        script = script_of(sample, min_letters=1, share=0.5)
        if script is not None and script != "LATIN":
            return f"{script.lower()} script"
        if script is None and any(ch.isalpha() for ch in sample):
            return "mixed scripts"
        letters = [ch for ch in sample.lower() if ch.isalpha()]
        foreign = sum(
            not ch.isascii() and ch not in lexicons.COVERED_LETTERS and unicodedata.name(ch, "").startswith("LATIN")
            for ch in letters
        )
        if foreign and foreign >= FOREIGN_LETTER_SHARE * len(letters):
            return "letters of a language the lexicons do not cover"
    ws = words(sample) if words_ is None else words_
    if len(ws) < MIN_WORDS:
        return None
    distinct = set(ws)
    inside, outside = _vocabularies(frozenset(covered))
    readable = len(distinct & inside)
    if readable * 4 >= len(distinct):
        return None
    best, hits = max(((lang, len(distinct & vocab)) for lang, vocab in outside.items()), key=_hits)
    if hits >= 2 and hits > readable:
        return f"{best} text"
    return None


def _hits(pair: tuple[str, int]) -> int:
    return pair[1]


@lru_cache(maxsize=1)
def _elsewhere_markers() -> frozenset[str]:
    english = lexicons.LANGUAGE_WORDS["en"] | lexicons.STOP_WORDS
    other = frozenset().union(*(v for k, v in lexicons.LANGUAGE_WORDS.items() if k != "en"))
    return (other | lexicons.ELSEWHERE_MARKERS) - english - lexicons.NOT_MARKERS


def maybe_elsewhere(text: str, *, words_: list[str] | None = None) -> bool:
    """Might `text` be Spanish, French, German, Portuguese or Italian? Cheap; false alarms only cost time.

    True when it has accented letters of those languages or two of their frequent words, so checks
    can keep their English-only patterns (and their speed) for English text.
    """
    sample = text[:SAMPLE_CHARS].lower()
    if not sample.isascii() and any(ch in lexicons.COVERED_LETTERS for ch in sample):
        return True
    return len(_elsewhere_markers().intersection(words(sample) if words_ is None else words_)) >= 2
