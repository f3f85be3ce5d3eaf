"""D3 `refusal_loop`: the assistant stonewalls the user with refusal after refusal (V5− none/partial/fully).

Per reply, `is_refusal` reads the opening sentences (quotes set aside; opening courtesies such as
"Hello! I'm here to help." not counted) for a speaker who cannot or will not do what was asked, or
who objects to the request, in the languages of `lexicons.REFUSAL_LANGUAGES`; a negated action that
waits on the user ("I won't make any changes until you confirm"), is put off ("I won't delete it
yet") or only supposed ("If I can't cancel it online, I'll transfer you"), or an answer that the
request has none ("... is a fictional character") is no refusal. Text in another language or script
is unknown (None), never "no refusal".

A refusal that gives its reason (a policy, a rule, a condition, a time or age limit, the law, the
assistant's named scope, or a fact it follows from: "..., which means I can't ...") is `explained`;
one that offers a way on (a hand-off, an alternative it can do, a referral, a link or a number) is
`redirected`; otherwise it is `bare`. A generic offer ("Is there anything else I can help you with?"),
a wish ("I wish I could help") or a negated offer ("no puedo ayudarle con eso") is no way on. A run of consecutive refusing replies fails the user (`fully`)
when it is three or more long, or the thread ends on it, and at least two of its refusals are bare:
a correct policy denial repeated to an insistent user is not a failure. Any other run of two or more
is `partial` (visible, passing).
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic import languages, lexicons
from tracing_eval.metrics.deterministic.views import Located, replies
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread
from tracing_eval.text import ASCII_LETTERS, Folded, iter_sentences

DEFAULT_THRESHOLD = 0.7
WEIGHTS: dict[str, float] = {"none": 1.0, "partial": 0.7, "fully": 0.0}
#: how many opening sentences of a reply are read for a refusal
HEAD_SENTENCES = 3
#: at most this many characters are read for those sentences
HEAD_CHARS = 600
#: a run fails the user with this many unexplained, unredirected refusals in it
BARE_IN_FAILING_RUN = 2

#: case-insensitive cue patterns (`Folded`: lower-cased ASCII text goes to a case-sensitive copy)
_CUE = Folded("|".join(f"(?:{p})" for p in lexicons.REFUSAL_CUES["en"]))
_CUE_ELSEWHERE = Folded(
    "|".join(f"(?:{p})" for lang, cues in lexicons.REFUSAL_CUES.items() if lang != "en" for p in cues)
)
_CONDITION = Folded("|".join(f"(?:{p})" for p in lexicons.CONDITION_CUES.values()))
_NO_ANSWER = Folded(lexicons.NO_ANSWER_CUES)
_GOES_ON = Folded(lexicons.GOES_ON_CUES)
_IDIOM = Folded(lexicons.IDIOM_CUES)
#: right after the refused verb (and its object): the refusal is put off, not made ("I won't delete it yet")
_DEFERRED = re.compile(
    r"(?:\s+(?:it|that|this|them|these|those|anything|any\s+\w+|the\s+\w+|your\s+\w+))?\s+yet\s*(?:[.!;,]|$)",
    re.IGNORECASE,
)
_EXPLAINED = Folded(lexicons.EXPLANATION_CUES)
_REDIRECTED = Folded(lexicons.ALTERNATIVE_CUES)
#: right before an offer: it is wished, doubted, negated or a generic "anything else I can help with?"
_NO_OFFER_BEFORE = re.compile(
    r"(?:\b(?:wish|not sure|don't think|do not think|doubt|nothing|anything|something|else|if|whether|as|no|non|não"
    r"|ne)\s+(?:that\s+)?)$",
    re.IGNORECASE,
)
#: right after an offer: it is no way on ("I can help with anything else", "... with other questions")
_NO_OFFER_AFTER = re.compile(
    r"\s+(?:you\s+)?(?:with\s+)?(?:anything|something|any\s+other|other\s+(?:questions?|things|requests|topics))\b",
    re.IGNORECASE,
)
_FOLD = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00a0": " "})
_QUOTED = re.compile(
    r"\"[^\"\n]{0,300}\"|\u201c[^\u201d\n]{0,300}\u201d|\u00ab[^\u00bb\n]{0,300}\u00bb"
    # in single quotes (curly ones folded): an apostrophe inside is followed by a letter ("can't")
    r"|(?<!\w)'(?=\w)(?:[^'\n]|'(?=\w)){1,300}'(?!\w)"
)
#: a reply this short is read with every covered language's cues ("Non posso farlo.", "No me es posible
#: ayudarle."): too few words to tell its language by
SHORT_WORDS = 6
_TOKEN = re.compile(r"[^\W\d_]+")
#: a whole opening sentence of courtesy that says nothing about the request (English): no clause
#: break and no word that could start a refusal or an objection
_COURTESY = Folded(
    r"(?![^.!?]*\b(?:but|however|must|not|cannot|can't|unable|won't|although|though|while|and)\b)"
    r"(?:(?:hi|hello|hey|greetings)(?:\s+there)?|thanks?(?:\s+you)?(?:\s+(?:so|very)\s+much)?(?:\s+for\b[^.!?,;]{0,100})?"
    r"|(?:i(?:'m|\s+am)|we(?:'re|\s+are))\s+(?:(?:so|very|always|more\s+than)\s+)?(?:happy|glad|here|delighted)"
    r"\b[^.!?,;]{0,100}"
    r"|i\s+(?:understand|appreciate)\b[^.!?,;]{0,120}"
    # a support agent's account of a look-up: "I've checked your account.", "I see your point."
    r"|i(?:'ve|\s+have)?\s+(?:just\s+|now\s+)?(?:checked|looked\s+(?:into|at|up)|reviewed|gone\s+through|pulled\s+up"
    r"|double-checked)\b[^.!?,;]{0,100}|i\s+(?:see|hear)\s+(?:your\s+point|you|what\s+you\s+mean)"
    r"|as\s+an?\s+(?:helpful|respectful|honest|responsible|ethical|ai)\b[^.!?;]{0,120}"
    r"|great|good|sure|of course|certainly|absolutely)\s*[.!]*\s*$"
)
_NEGATED_TOKEN = re.compile(r"n['\u2019\u02bc]t\b|\bn['\u2019\u02bc]|\bkein")
#: the clause before a refusal cue makes it hypothetical: "If I can't cancel it online, I'll transfer
#: you", "... an agent if I can't"; not "even if", which concedes. In the other languages only a clause
#: that opens with the word: a Spanish "se" or a French "si" ("je suis si désolé") inside one is no "if".
_IF_CLAUSE = Folded(r"(?<!even )\b(?:if|in case|whether)\s|^\s*(?:si|wenn|falls|ob)\s")


def uncovered_language(text: str) -> str | None:
    """Why the refusal lexicons cannot read `text`, or None (see `languages.uncovered_language`)."""
    return languages.uncovered_language(text, lexicons.REFUSAL_LANGUAGES)


def _fold(text: str) -> str:
    """Typographic apostrophes to ' and no-break spaces to spaces (ASCII text has neither)."""
    return text if text.isascii() else text.translate(_FOLD)


def head(text: str) -> list[str]:
    """The opening sentences of a reply, apostrophes folded and quoted passages set aside; courtesies
    before the first sentence with content ("Hello!", "Thank you for your question!", "I'm here to
    help.") are read but not counted among them."""
    opening = _fold(text[:HEAD_CHARS])
    if '"' in opening or "'" in opening or "\u201c" in opening or "\u00ab" in opening:
        opening = _QUOTED.sub(" ", opening)
    pieces = iter_sentences(opening)
    held = list(islice(pieces, HEAD_SENTENCES + 1))  # a courtesy is skipped only before 3 more sentences
    skipped = 0
    while skipped < len(held) - HEAD_SENTENCES and _COURTESY.match(held[skipped]):
        skipped += 1
        held.extend(islice(pieces, 1))
    return held[: skipped + HEAD_SENTENCES]


def _negated_token(opening: str) -> bool:
    """A word ending in n't, starting with n' (any apostrophe) or `kein`; the substring tests skip
    the pattern for the openings that hold neither an apostrophe nor `kein`."""
    if "kein" not in opening and not any(a in opening for a in "'\u2019\u02bc"):
        return False
    return bool(_NEGATED_TOKEN.search(opening))


def _supposed(sentence: str, start: int) -> bool:
    """Whether the clause that runs up to `start` makes what follows only supposed (`_IF_CLAUSE`)."""
    begin = max(sentence.rfind(mark, 0, start) for mark in ",;:") + 1
    return bool(_IF_CLAUSE.search(sentence[begin:start]))


def tokens(low: str) -> list[str]:
    """The words of lower-cased `low` (`_TOKEN`); ASCII text is split at every character but a
    letter, the same words without a regex."""
    if low.isascii():
        return low.translate(ASCII_LETTERS).split()
    return _TOKEN.findall(low)


def may_refuse(low: str, words_: list[str] | None = None) -> bool:
    """False when lower-cased `low` cannot hold a refusal cue: every cue has a trigger word
    (`lexicons.REFUSAL_TRIGGERS`), a word ending in n't, starting with n' or `kein` (a cheap
    pre-filter; `words_` are its words when the caller has them)."""
    if words_ is None:
        words_ = tokens(low)
    return not lexicons.REFUSAL_TRIGGERS.isdisjoint(words_) or _negated_token(low)


def read(text: str) -> tuple[str | None, str | None]:
    """(why the lexicons cannot read the reply, the opening sentence in which it refuses); one pass."""
    opening = text[:HEAD_CHARS].lower()
    ws = tokens(opening)
    why = languages.uncovered_language(text, lexicons.REFUSAL_LANGUAGES, words_=ws)
    if why is not None:
        return why, None
    if not may_refuse(opening, ws):
        return None, None
    sentences = head(text)
    elsewhere = len(ws) <= SHORT_WORDS or languages.maybe_elsewhere(text, words_=ws)
    cues = (_CUE, _CUE_ELSEWHERE) if elsewhere else (_CUE,)
    for sentence in sentences:
        if not may_refuse(sentence.lower()):  # the same test per sentence: most have no trigger
            continue
        for cue in cues:
            for m in cue.finditer(sentence):
                if (
                    _CONDITION.search(sentence, m.end())
                    or _supposed(sentence, m.start())
                    or _DEFERRED.match(sentence, m.end())
                    or _IDIOM.search(sentence[m.start() : m.end() + 40])
                ):
                    continue
                if any(_GOES_ON.search(s) or _NO_ANSWER.search(s) for s in sentences):
                    return None, None
                return None, sentence
    return None, None


def refusal_sentence(text: str) -> str | None:
    """The opening sentence in which the reply refuses, or None (also for text it cannot read)."""
    return read(text)[1]


def is_refusal(text: str) -> bool | None:
    """True when the reply refuses, False when it does not, None when its language is not covered."""
    why, sentence = read(text)
    if why is not None:
        return None
    return sentence is not None


def refusal_kind(text: str) -> str:
    """`explained` (gives a reason), `redirected` (offers a way on) or `bare`, for a refusing reply."""
    folded = _fold(text)
    if _EXPLAINED.search(folded):
        return "explained"
    if any(_way_on(folded, m) for m in _REDIRECTED.finditer(folded)):
        return "redirected"
    return "bare"


def _way_on(text: str, m: re.Match[str]) -> bool:
    """Whether the offer matched in `text` is a way on: not wished ("I wish I could help"), doubted,
    negated ("no puedo ayudarle con eso") or the generic "Is there anything else I can help with?"."""
    return not (
        _NO_OFFER_BEFORE.search(text, max(0, m.start() - 20), m.start()) or _NO_OFFER_AFTER.match(text, m.end())
    )


def runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(start, length) of every run of consecutive True values."""
    out: list[tuple[int, int]] = []
    start = None
    for k, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = k
        elif not flag and start is not None:
            out.append((start, k - start))
            start = None
    return out


def failing(start: int, length: int, kinds: list[str | None], total: int) -> bool:
    """A run fails the user: long (3+) or final (2+), with at least two bare refusals in it."""
    long_enough = length >= 3 or (length >= 2 and start + length == total)
    return long_enough and sum(k == "bare" for k in kinds[start : start + length]) >= BARE_IN_FAILING_RUN


def verdict(flags: list[bool], kinds: list[str | None] | None = None) -> str:
    """none / partial / fully for the refusal flags of the replies in order (kinds default to bare)."""
    kinds = kinds if kinds is not None else ["bare" if f else None for f in flags]
    found = runs(flags)
    if any(failing(s, n, kinds, len(flags)) for s, n in found):
        return "fully"
    if any(n >= 2 for _, n in found):
        return "partial"
    return "none"


class RefusalLoop(MetricBase):
    """Thread-scope runs of refusals that leave the user without a reason or a way on."""

    name = "refusal_loop"
    version = "11"
    tier = "deterministic"
    scopes = ("thread",)
    default_threshold = DEFAULT_THRESHOLD
    description = "Repeated refusals by the assistant without a reason or an alternative (V5−: none/partial/fully)."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        items: list[Located] = replies(thread)
        if not items:
            return [not_applicable(self.spec, "no assistant replies with text")]
        readings = [read(x.text) for x in items]
        unread = {x.position: why for x, (why, _) in zip(items, readings, strict=True) if why is not None}
        if len(unread) == len(items):
            reasons = sorted(set(unread.values()))
            return [
                not_applicable(
                    self.spec,
                    "replies in a language the refusal lexicons do not cover ("
                    + "; ".join(reasons)
                    + f"; covered: {', '.join(lexicons.REFUSAL_LANGUAGES)})",
                )
            ]
        flags = [sentence is not None for _, sentence in readings]
        kinds = [refusal_kind(x.text) if f else None for x, f in zip(items, flags, strict=True)]
        label = verdict(flags, kinds)
        found = runs(flags)
        longest = max((n for _, n in found), default=0)
        positions = [x.position for x in items]
        evidence: dict[str, Any] = {
            "refusal_messages": [p for p, f in zip(positions, flags, strict=True) if f],
            "bare_refusals": [p for p, k in zip(positions, kinds, strict=True) if k == "bare"],
            "explained_refusals": [p for p, k in zip(positions, kinds, strict=True) if k == "explained"],
            "redirected_refusals": [p for p, k in zip(positions, kinds, strict=True) if k == "redirected"],
            "runs": [
                {
                    "positions": positions[s : s + n],
                    "length": n,
                    "bare": sum(k == "bare" for k in kinds[s : s + n]),
                    "fails_user": failing(s, n, kinds, len(flags)),
                }
                for s, n in found
                if n >= 2
            ],
            "longest_run": longest,
            "ends_in_refusal": bool(flags[-1]),
            "refusals": sum(flags),
            "replies": len(items),
            "unread_messages": sorted(unread),
        }
        return [
            ok(
                self.spec,
                WEIGHTS[label],
                label=label,
                reason=_reason(label, flags, kinds, longest, len(unread)),
                evidence=evidence,
            )
        ]


def _reason(label: str, flags: list[bool], kinds: list[str | None], longest: int, unread: int) -> str:
    note = f"; {unread} reply(ies) in a language the lexicons do not cover were not read" if unread else ""
    if label == "none":
        return f"{sum(flags)} refusal(s), never two in a row" + note
    if label == "partial":
        return (
            f"{longest} refusals in a row, each with a reason or a way on, or followed by progress "
            "(a repeated correct denial is not a failure)" + note
        )
    bare = sum(k == "bare" for k in kinds)
    return (
        f"refusal loop: longest run {longest}, {bare} refusal(s) without a reason or an alternative"
        + (", and the thread ends on refusals" if flags[-1] else "")
        + note
    )
