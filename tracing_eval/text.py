"""Small text helpers shared by conventions and deterministic metrics."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterator

_ASCII_LETTERS = string.ascii_letters.encode("ascii")

#: Unicode script names (first word of the character name) folded together for script detection.
_SCRIPT_FOLD = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "HANGUL", "FULLWIDTH": "LATIN"}


def script_of(text: str, *, min_letters: int = 12, share: float = 0.6) -> str | None:
    """The dominant Unicode script of the letters in `text` (`LATIN`, `CJK`, `CYRILLIC`, ...).

    None when there are fewer than `min_letters` letters or no script has `share` of them.
    """
    if text.isascii():  # letters are what bytes.translate leaves out of the deleted letters
        letters = len(text) - len(text.encode("ascii").translate(None, _ASCII_LETTERS))
        return "LATIN" if letters >= min_letters else None
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            script = name.split(" ", 1)[0] if name else "UNKNOWN"
            script = _SCRIPT_FOLD.get(script, script)
            counts[script] = counts.get(script, 0) + 1
    total = sum(counts.values())
    if total < min_letters:
        return None
    script, n = max(counts.items(), key=lambda kv: kv[1])
    return script if n / total >= share else None


# --- Script-independent sentences and word units -------------------------------------------------

#: Scripts written without spaces between words: Han, Hiragana, Katakana, Thai, Lao, Myanmar, Khmer
#: (the ranges of a character class, for patterns to embed).
SPACELESS = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(rf"[{SPACELESS}]+|[^\W_{SPACELESS}]+")
#: one character of those scripts (`match` tests the first character, `search` any)
SPACELESS_CHAR = re.compile(rf"[{SPACELESS}]")
_WORD = re.compile(r"[^\W_]+")


def ascii_runs(keep: str) -> dict[int, str]:
    """A `str.translate` table that turns every ASCII character but those of `keep` into a space: on
    ASCII text `text.translate(table).split()` is `re.findall(f"[{keep}]+", text)`, and faster."""
    return str.maketrans({chr(c): " " for c in range(128) if chr(c) not in keep})


#: `ASCII_ALNUM` runs are the matches of `[a-z0-9]+`, `ASCII_LETTERS` runs those of `[a-z]+`
ASCII_ALNUM = ascii_runs(string.ascii_lowercase + string.digits)
ASCII_LETTERS = ascii_runs(string.ascii_lowercase)
_APOSTROPHE = re.compile(r"(?<=[^\W_])['\u2019](?=[^\W_])")
#: Sentence ends: Latin-style punctuation before a space, full-width CJK/Devanagari/Arabic ends, line breaks.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；｡।؟])\s*|\n+")


#: the breaks of `split_sentences`, found from the mark before a break (a set of first characters
#: lets `re` skip ahead; a look-behind at every position does not)
_BREAK = re.compile(r"[.?!]\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences that end at `.`, `?` or `!` before white space, or at a line break, stripped, empty
    ones left out: the same as splitting at `(?<=[.?!])\\s+|\\n+` (an email or a decimal keeps its dot)."""
    return list(iter_sentences(text))


def iter_sentences(text: str) -> Iterator[str]:
    """The sentences of `split_sentences(text)` one at a time, for a reader that needs only the first few."""
    start = 0
    for m in _BREAK.finditer(text):
        at = m.start()
        end = at if text[at] == "\n" else at + 1  # a mark stays with its sentence
        piece = text[start:end].strip()
        if piece:
            yield piece
        start = m.end()
    piece = text[start:].strip()
    if piece:
        yield piece


def sentences(text: str) -> list[str]:
    """Split text into sentences in any script: `. ! ? …` before a space, `。！？；` and the
    Devanagari/Arabic ends with or without a space, and line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def word_units(text: str) -> list[str]:
    """Lower-cased word units of any script (NFKC, apostrophes dropped: `don't` -> `dont`).

    Space-separated scripts give their words; runs of a script written without spaces (Chinese,
    Japanese, Thai, ...) give overlapping character pairs (`订单已发货` -> `订单 单已 已发 发货`), a
    dictionary-free stand-in for words that makes two sentences in those scripts comparable.
    """
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).lower()
    if "'" in folded or "\u2019" in folded:
        folded = _APOSTROPHE.sub("", folded)
    if folded.isascii():
        return folded.translate(ASCII_ALNUM).split()
    if not SPACELESS_CHAR.search(folded):
        return _WORD.findall(folded)
    out: list[str] = []
    for run in _RUN.findall(folded):
        if SPACELESS_CHAR.match(run):
            out.extend(run[k : k + 2] for k in range(max(1, len(run) - 1)))
        else:
            out.append(run)
    return out


_ENDS = frozenset(".!?…。！？；｡।؟\n")
# A run of sentence marks is tried whole from its first mark only (the look-behind, and no giving
# back): a mark is a sentence end only when its run is followed by a space, the end or a spaceless
# script, and retrying inside a long run not so followed ("!?!?...") would cost its square. A "?" or
# "!" between two letters ends a sentence too: chatbots run sentences together ("movie?with").
# Each mark looks behind only after itself (`[.!?](?<![.!?]{2})` is `(?<![.!?])[.!?]`): when every
# alternative opens with a character class, `re` skips ahead over the spaces between words.
_PIECE = re.compile(
    rf"[^\W_{SPACELESS}]+|[{SPACELESS}]+|[.!?…](?<![.!?…]{{2}})[.!?…]*+(?=\s|$|[{SPACELESS}])"
    r"|[?!](?<=[^\W\d_][?!])[?!]*+(?=[^\W\d_])|[。！？；｡।؟\n]"
)
# The same ends in ASCII text, as one pattern that opens with one character class (so `re` skips
# ahead to the next mark): a line break; a run of marks followed by a space or the end; "?" or "!"
# between two letters.
_ASCII_END = re.compile(r"[.!?\n](?:(?<=\n)|(?<![.!?]{2})[.!?]*+(?=\s|$)|(?<=[a-z][?!])[?!]*+(?=[a-z]))")


def sentence_words(text: str) -> list[list[str]]:
    """The word units of each sentence, in one pass over the text: the sentence ends of `sentences`,
    and a "?" or "!" between two letters; the units of `word_units`; sentences without words left out."""
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).lower()
    if "'" in folded or "\u2019" in folded:
        folded = _APOSTROPHE.sub("", folded)
    if folded.isascii():  # the text between two ends, split into its `[a-z0-9]+` runs
        return [units for part in _ASCII_END.split(folded) if (units := part.translate(ASCII_ALNUM).split())]
    out: list[list[str]] = []
    words: list[str] = []
    for piece in _PIECE.findall(folded):
        first = piece[0]
        if first in _ENDS:
            if words:
                out.append(words)
                words = []
        elif first >= "\u0e00" and SPACELESS_CHAR.match(first):
            words.extend(piece[k : k + 2] for k in range(max(1, len(piece) - 1)))
        else:
            words.append(piece)
    if words:
        out.append(words)
    return out


def could_match(text: str, needs: tuple[str, ...]) -> bool:
    """A cheap gate before a slow case-insensitive regex whose every match holds one of `needs` (lower
    case literals): False only when `text` is ASCII and holds none of them. Non-ASCII text always
    passes, because case-insensitive matching folds more than `str.lower` there."""
    return not text.isascii() or holds_any(text.lower(), needs)


def holds_any(low: str, needs: tuple[str, ...]) -> bool:
    """True when `low` holds one of `needs` (a plain loop: cheaper than any() over a generator or a map
    for a few needles)."""
    for n in needs:
        if n in low:
            return True
    return False


# --- Case-insensitive patterns, fast on ASCII text ------------------------------------------------

#: non-ASCII characters that match an ASCII letter case-insensitively (İ ı ſ and the Kelvin sign)
_FOLDS_TO_ASCII = "\u0130\u0131\u017f\u212a"
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_RANGE = re.compile(r"(.)-(.)", re.DOTALL)


class Folded:
    """A case-insensitive pattern that reads ASCII text lower-cased with a case-sensitive copy of
    itself (Python's `re` is about three times slower under IGNORECASE) and any other text as it is.

    Matches are the same as the case-insensitive pattern's, at the same positions; on ASCII text a
    match's groups are lower case (slice the original text by `start()` / `end()` for its own case).
    The source must not spell an upper-case letter (outside escapes such as `\\W`), turn case
    sensitivity back on, or name a character that folds to an ASCII letter: then lower-casing the
    text cannot change what matches, and the constructor checks it.
    """

    __slots__ = ("ascii", "pattern", "unicode")

    def __init__(self, source: str, flags: int = 0) -> None:
        why = _unfoldable(source)
        if why:
            raise ValueError(f"pattern {source[:60]!r}... cannot be folded: {why}")
        self.pattern = source
        fast = source if flags & re.VERBOSE else factor_boundaries(source)
        self.unicode = re.compile(fast, flags | re.IGNORECASE)
        self.ascii = re.compile(fast, flags & ~re.IGNORECASE)

    @property
    def flags(self) -> int:
        return self.unicode.flags

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        if text.isascii():
            return self.ascii.search(text.lower(), pos)
        return self.unicode.search(text, pos)

    def search_lower(self, low: str) -> re.Match[str] | None:
        """`search` over ASCII text its caller has already lower-cased."""
        return self.ascii.search(low)

    def match(self, text: str) -> re.Match[str] | None:
        if text.isascii():
            return self.ascii.match(text.lower())
        return self.unicode.match(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        if text.isascii():
            return self.ascii.finditer(text.lower())
        return self.unicode.finditer(text)


def _skip(source: str, k: int) -> int:
    """The index after the escape, character class or single character at `k`."""
    if source[k] == "\\":
        return k + 2
    if source[k] != "[":
        return k + 1
    k += 1  # a `]` right after `[` or `[^` is a literal
    if k < len(source) and source[k] == "^":
        k += 1
    if k < len(source) and source[k] == "]":
        k += 1
    while k < len(source) and source[k] != "]":
        k += 2 if source[k] == "\\" else 1
    return k + 1


def alternatives(source: str) -> list[str]:
    """The top-level alternatives of a regular expression's source: split at `|` outside groups and
    character classes (`"|".join` of the result is `source` again)."""
    out: list[str] = []
    depth, start, k = 0, 0, 0
    while k < len(source):
        ch = source[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(source[start:k])
            start = k + 1
        k = _skip(source, k)
    return [*out, source[start:]]


def _group_body(alt: str) -> str | None:
    """The inside of `alt` when it is one non-capturing group `(?:...)` from end to end, else None."""
    if not alt.startswith("(?:") or not alt.endswith(")"):
        return None
    depth, k = 0, 0
    while k < len(alt):
        if alt[k] == "(":
            depth += 1
        elif alt[k] == ")":
            depth -= 1
            if depth == 0:
                return alt[3:-1] if k == len(alt) - 1 else None
        k = _skip(alt, k)
    return None


def factor_boundaries(source: str) -> str:
    """The same pattern with the `\\b` that leads consecutive alternatives taken out in front of them:
    `\\bfoo|(?:\\bbar|\\bqux)|^baz` -> `\\b(?:foo|bar|qux)|^baz` (an alternative that is one
    non-capturing group is opened first). Alternatives keep their order, so every match, span and group
    is the same; Python's `re` then tests the word boundary once per position instead of once per
    alternative, 2-5 times faster on long cue lists."""
    flat: list[str] = []
    pending = alternatives(source)
    while pending:
        alt = pending.pop(0)
        body = _group_body(alt)
        if body is None:
            flat.append(alt)
        else:
            pending[:0] = alternatives(body)
    runs: list[tuple[bool, list[str]]] = []
    for alt in flat:
        led = alt.startswith("\\b")
        if led and runs and runs[-1][0]:
            runs[-1][1].append(alt[2:])
        else:
            runs.append((led, [alt[2:] if led else alt]))
    if not any(led and len(alts) > 1 for led, alts in runs):
        return source
    return "|".join(
        ("\\b(?:" + "|".join(alts) + ")" if len(alts) > 1 else "\\b" + alts[0]) if led else alts[0]
        for led, alts in runs
    )


def _unfoldable(source: str) -> str | None:
    """Why lower-casing ASCII text could change what `source` matches case-insensitively, or None."""
    if re.search(r"\\[uUxN0-9]", source):
        return "a character given by code (write it as itself)"
    if "(?-i" in source:
        return "a case-sensitive group"
    plain = _ESCAPE.sub("", source)
    if any("A" <= ch <= "Z" for ch in plain):
        return "an upper-case letter"
    if any(ch in plain for ch in _FOLDS_TO_ASCII):
        return "a character that folds to an ASCII letter"
    for lo, hi in _RANGE.findall(plain):
        if any(lo <= ch <= hi for ch in _FOLDS_TO_ASCII):
            return f"the range {lo}-{hi} holds a character that folds to an ASCII letter"
    return None
