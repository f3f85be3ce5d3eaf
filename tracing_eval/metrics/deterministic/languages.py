"""Which language a text is in, as far as lexicon-based checks need to know (stdlib only).

The one place the deterministic tier guesses languages:
- `latin_language(text)`: which of the lexicons' Latin-script languages (en, es, fr, de, pt, it) a
  text is in, from function words, or None when unsure (`response_hygiene` compares user and reply);
- `uncovered_language(text, covered)`: why a check for the `covered` languages cannot read a text
  (another script, letters no covered language uses, or function words of another language), or
  None when it is readable or too short to tell; a cheap gate, not a language identifier;
- `maybe_elsewhere(text)`: might an English-looking text be in another covered language.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from tracing_eval.metrics.deterministic import lexicons
from tracing_eval.metrics.deterministic.similarity import words as all_words
from tracing_eval.text import ASCII_LETTERS, script_of

#: Latin-script text needs this many words before function words can tell its language
MIN_WORDS = 6
#: share of Latin letters with diacritics that no covered language uses ("ł", "ş", "ő", "ả")
FOREIGN_LETTER_SHARE = 0.02
#: characters of a text read to tell its language
SAMPLE_CHARS = 240
_WORD = re.compile(r"[^\W\d_]+")
#: `latin_language` needs this many words in the text, and this many function-word hits for its guess
GUESS_MIN_WORDS = 6
GUESS_MIN_HITS = 3
#: every function word of `LANGUAGE_WORDS`, and the languages each belongs to
_FUNCTION_WORDS = frozenset().union(*lexicons.LANGUAGE_WORDS.values())
_LANGUAGES_OF = {
    w: tuple(lang for lang, vocab in lexicons.LANGUAGE_WORDS.items() if w in vocab) for w in _FUNCTION_WORDS
}


@lru_cache(maxsize=256)  # the messages of a thread or two: the checks of one thread share them
def latin_language(text: str) -> str | None:
    """A guess among the lexicons' Latin-script languages from function words (each occurrence counts);
    None when the text is short or the best language is not at least twice as frequent as the next."""
    ws = all_words(text)
    if len(ws) < GUESS_MIN_WORDS:
        return None
    found = dict.fromkeys(lexicons.LANGUAGE_WORDS, 0)
    for w in [w for w in ws if w in _FUNCTION_WORDS]:  # one test per word: most are no function word
        for lang in _LANGUAGES_OF[w]:
            found[lang] += 1
    hits = sorted(((n, lang) for lang, n in found.items()), reverse=True)
    (best, lang), (second, _) = hits[0], hits[1]
    if best >= GUESS_MIN_HITS and best >= 2 * max(second, 1):
        return lang
    return None


@lru_cache(maxsize=16)
def _vocabularies(covered: frozenset[str]) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Function words of the covered languages, and of every other language we can recognise."""
    known = {**lexicons.LANGUAGE_WORDS, **lexicons.OTHER_LANGUAGE_WORDS}
    known["en"] = known["en"] | lexicons.STOP_WORDS
    inside = frozenset().union(*(known[lang] for lang in covered if lang in known))
    outside = {lang: words - inside for lang, words in known.items() if lang not in covered}
    return inside, outside


#: a web address: its pieces ("na", "com", "en-us") are no words of a language
_URL = re.compile(r"\S*(?:://|www\.)\S*")


def words(text: str) -> list[str]:
    """The lower-cased words of the first `SAMPLE_CHARS` characters, web addresses left out: enough
    to tell a language."""
    sample = text[:SAMPLE_CHARS].lower()
    if "://" in sample or "www." in sample:
        sample = _URL.sub(" ", sample)
    if sample.isascii():
        return sample.translate(ASCII_LETTERS).split()
    return _WORD.findall(sample)


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
