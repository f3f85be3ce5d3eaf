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
_WORD = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=16)
def _vocabularies(covered: frozenset[str]) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Function words of the covered languages, and of every other language we can recognise."""
    known = {**lexicons.LANGUAGE_WORDS, **lexicons.OTHER_LANGUAGE_WORDS}
    known["en"] = known["en"] | lexicons.STOP_WORDS
    inside = frozenset().union(*(known[lang] for lang in covered if lang in known))
    outside = {lang: words - inside for lang, words in known.items() if lang not in covered}
    return inside, outside


def uncovered_language(text: str, covered: Iterable[str]) -> str | None:
    """Why a check for the `covered` languages cannot read `text`, or None when it can (or cannot tell)."""
    script = script_of(text, min_letters=1, share=0.5)
    if script is not None and script != "LATIN":
        return f"{script.lower()} script"
    if script is None and any(ch.isalpha() for ch in text):
        return "mixed scripts"
    if not text.isascii():
        letters = [ch for ch in text.lower() if ch.isalpha()]
        foreign = sum(
            not ch.isascii() and ch not in lexicons.COVERED_LETTERS and unicodedata.name(ch, "").startswith("LATIN")
            for ch in letters
        )
        if foreign and foreign >= FOREIGN_LETTER_SHARE * len(letters):
            return "letters of a language the lexicons do not cover"
    ws = [w.lower() for w in _WORD.findall(text)]
    if len(ws) < MIN_WORDS:
        return None
    inside, outside = _vocabularies(frozenset(covered))
    readable = sum(w in inside for w in ws)
    best, hits = "", 0
    for lang, vocab in outside.items():
        n = sum(w in vocab for w in ws)
        if n > hits:
            best, hits = lang, n
    if hits >= 2 and hits > readable:
        return f"{best} text"
    return None
