"""Word-level text normalisation and similarity for the lexical checks (D1, D5).

`tokens` turns a reply into content tokens (NFKC, lower case, no punctuation, no stop-words,
crude suffix stemming; word units of any script, see `tracing_eval.text.word_units`);
`similarity` is the maximum of 3-gram shingle Jaccard, shingle containment and the word-level
Indel ratio (2 x longest common subsequence / total length, rapidfuzz; the `difflib` ratio it
replaced gives the same value on short token lists and costs 15 times more). Character-level
ratios are avoided on purpose: they rate unrelated short replies as half-similar.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import filterfalse

from rapidfuzz.distance import Indel

from tracing_eval.metrics.deterministic.lexicons import STOP_WORDS
from tracing_eval.text import ASCII_ALNUM, sentences, word_units

SHINGLE = 3

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_APOSTROPHE = re.compile(r"(?<=[^\W_])['\u2019](?=[^\W_])")

# (suffix, replacement, minimum word length for the rule to apply)
_SUFFIXES: tuple[tuple[str, str, int], ...] = (
    ("ies", "y", 5),
    ("ied", "y", 5),
    ("ing", "", 6),
    ("ed", "", 5),
    ("s", "", 4),
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Strip one common English suffix: `tried`->`try`, `restarting`->`restart`, `caches`->`cache`."""
    for suffix, replacement, min_len in _SUFFIXES:
        if len(word) >= min_len and word.endswith(suffix):
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: -len(suffix)] + replacement
    return word


@lru_cache(maxsize=256)  # the messages of a thread or two: the checks of one thread share them
def words(text: str) -> tuple[str, ...]:
    """Lower-cased words after NFKC, with apostrophes removed (`don't` -> `dont`). Memoised by text:
    several metrics read the same message."""
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).lower()
    if "'" in folded or "\u2019" in folded:
        folded = _APOSTROPHE.sub("", folded)
    if folded.isascii():
        return tuple(folded.translate(ASCII_ALNUM).split())
    return tuple(_WORD.findall(folded))


def tokens(text: str) -> list[str]:
    """Content tokens: words that are not stop-words, stemmed."""
    return list(_tokens(text))


@lru_cache(maxsize=2048)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(map(stem, filterfalse(STOP_WORDS.__contains__, word_units(text))))


def shingles(toks: list[str], k: int = SHINGLE) -> frozenset[tuple[str, ...]]:
    """The set of k-word shingles; a shorter non-empty list is one shingle."""
    if len(toks) < k:
        return frozenset([tuple(toks)]) if toks else frozenset()
    return frozenset(tuple(toks[i : i + k]) for i in range(len(toks) - k + 1))


@dataclass(frozen=True)
class Profile:
    """A text prepared once for many comparisons."""

    tokens: tuple[str, ...]
    shingles: frozenset[tuple[str, ...]] = field(repr=False)

    @classmethod
    def of(cls, text: str) -> Profile:
        return cls.of_tokens(_tokens(text))

    @classmethod
    def of_tokens(cls, toks: tuple[str, ...] | list[str]) -> Profile:
        toks = tuple(toks)
        return cls(toks, shingles(list(toks)))

    def __len__(self) -> int:
        return len(self.tokens)


def similarity(a: Profile, b: Profile) -> float:
    """max(shingle Jaccard, shingle containment, word-level Indel ratio), in [0, 1]."""
    if not a.tokens or not b.tokens:
        return 0.0
    if a.tokens == b.tokens:
        return 1.0
    best = 0.0
    common = len(a.shingles & b.shingles)
    if common:
        best = max(
            common / len(a.shingles | b.shingles),
            common / min(len(a.shingles), len(b.shingles)),
        )
        if best >= 1.0:
            return 1.0
    return min(1.0, max(best, Indel.normalized_similarity(a.tokens, b.tokens)))


def text_similarity(a: str, b: str) -> float:
    """Convenience wrapper over `similarity` for two raw texts."""
    return similarity(Profile.of(a), Profile.of(b))


__all__ = ["Profile", "sentences", "similarity", "stem", "text_similarity", "tokens", "words"]
