"""D1 `repetition`: lexical repeats between assistant replies, on the seed's V5− verdict scale.

Reply j repeats reply i (i among the W previous replies) when their word-level similarity is
>= 0.8 (near-verbatim) or >= 0.5 (rehash), unless the two user turns asked the same thing
(a consistent answer to a repeated question is neutral). Replies with fewer than four content
tokens are not compared. A rehash must still be one after the words the user brought up just
before the first reply are set aside, and share three or more words: echoing the topic of the
conversation is not repeating oneself. A reply that brings a number or code the earlier one did
not have (another reservation, a new total) carries new information and is not a repeat.
The verdict weighs the end of the thread: a loop that recovers is `partial`, one that ends on a
repeat is `mostly`, two repeats at the end are `fully`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.similarity import Profile, sentences, similarity, tokens, words
from tracing_eval.metrics.deterministic.views import Located, replies, user_text_by_turn
from tracing_eval.model import MetricResult, Scope, Thread, not_applicable, score_result

NAME = "repetition"
VERSION = "1"
DEFAULT_THRESHOLD = 0.7

#: The seed's inverted verdict scale (RepetitivePatternDetection): higher is better.
WEIGHTS: dict[str, float] = {"none": 1.0, "minor": 0.9, "partial": 0.7, "mostly": 0.3, "fully": 0.0}

WINDOW = 6
NEAR_VERBATIM = 0.8
REHASH = 0.5
SAME_QUESTION = 0.8
MIN_TOKENS = 4
MIN_SHARED = 3
TOPIC_TURNS = 3
MIN_SEGMENT_TOKENS = 3
MAX_SEGMENTS = 20

_ENTITY = re.compile(r"\b(?:[\w-]*\d[\w-]*|[A-Z][A-Z0-9]{4,})\b")


@dataclass(frozen=True)
class Pair:
    first: Located
    repeat: Located
    similarity: float

    @property
    def kind(self) -> str:
        return "near_verbatim" if self.similarity >= NEAR_VERBATIM else "rehash"

    def as_evidence(self) -> dict[str, Any]:
        return {
            "first_turn": self.first.turn,
            "repeat_turn": self.repeat.turn,
            "first_position": self.first.position,
            "repeat_position": self.repeat.position,
            "similarity": self.similarity,
            "kind": self.kind,
        }


def _same_question(a: str, b: str) -> bool:
    """True when two user turns ask the same thing (similar, or identical short texts)."""
    if not a.strip() or not b.strip():
        return False
    wa, wb = words(a), words(b)
    if wa and wa == wb:
        return True
    return similarity(Profile.of(a), Profile.of(b)) >= SAME_QUESTION


def entities(text: str) -> frozenset[str]:
    """Numbers and codes in a reply (`8841-22`, `HAT136`, `$305`, `ZFA04Y`), lower-cased."""
    return frozenset(m.lower() for m in _ENTITY.findall(text))


def _topic_words(user_text: dict[int, str], turn: int) -> set[str]:
    """Content tokens of the user messages leading up to (and in) `turn`."""
    out: set[str] = set()
    for t in range(turn - TOPIC_TURNS, turn + 1):
        out.update(tokens(user_text.get(t, "")))
    return out


def _is_rehash(a: Profile, b: Profile, topic: set[str]) -> bool:
    """A 0.5-0.8 pair still counts once the user's topic words are set aside."""
    ta = [t for t in a.tokens if t not in topic]
    tb = [t for t in b.tokens if t not in topic]
    if min(len(ta), len(tb)) < MIN_SHARED:
        return False
    shared = sum(block.size for block in SequenceMatcher(None, ta, tb, autojunk=False).get_matching_blocks())
    if shared < MIN_SHARED:
        return False
    return similarity(Profile.of_tokens(ta), Profile.of_tokens(tb)) >= REHASH


def find_repeats(
    items: list[Located], user_text: dict[int, str], window: int = WINDOW
) -> tuple[list[Pair], list[Pair], float]:
    """Return (repeats, neutral pairs, max similarity) for replies long enough to compare.

    Each repeat pairs reply j with its most similar earlier reply in the window; neutral pairs are
    similar replies to a repeated user question, which do not count. The max similarity is over
    every non-neutral pair compared, before the topic check (a conservative gate for the judge).
    """
    profiles = [Profile.of(x.text) for x in items]
    codes = [entities(x.text) for x in items]
    repeats: list[Pair] = []
    neutral: list[Pair] = []
    top = 0.0
    for j, (item, prof) in enumerate(zip(items, profiles, strict=True)):
        best: Pair | None = None
        best_neutral: Pair | None = None
        for i in range(max(0, j - window), j):
            sim = round(similarity(profiles[i], prof), 4)
            if sim < REHASH:
                top = max(top, sim)
                continue
            pair = Pair(items[i], item, sim)
            if items[i].turn != item.turn and _same_question(
                user_text.get(items[i].turn, ""), user_text.get(item.turn, "")
            ):
                if best_neutral is None or sim > best_neutral.similarity:
                    best_neutral = pair
                continue
            top = max(top, sim)
            if codes[j] - codes[i]:
                continue  # new numbers or codes: an answer about something else
            if sim < NEAR_VERBATIM and not _is_rehash(profiles[i], prof, _topic_words(user_text, items[i].turn)):
                continue
            if best is None or sim > best.similarity:
                best = pair
        if best is not None:
            repeats.append(best)
        elif best_neutral is not None:
            neutral.append(best_neutral)
    return repeats, neutral, top


def verdict(repeats: list[Pair], items: list[Located]) -> str:
    """Map repeats to none/minor/partial/mostly/fully, weighing the end of the thread."""
    if not repeats:
        return "none"
    near = {p.repeat.position for p in repeats if p.similarity >= NEAR_VERBATIM}
    if not near:
        return "minor"
    last = [x.position for x in items[-2:]]
    if len(last) == 2 and all(pos in near for pos in last):
        return "fully"
    if last[-1] in near:
        return "mostly"
    return "partial"


def repeated_segments(items: list[Located]) -> list[dict[str, Any]]:
    """Sentences (3+ content tokens) whose normalised form occurs in two or more replies."""
    seen: dict[tuple[str, ...], list[Located]] = defaultdict(list)
    first_text: dict[tuple[str, ...], str] = {}
    for item in items:
        keys_here: set[tuple[str, ...]] = set()
        for sentence in sentences(item.text):
            key = tuple(tokens(sentence))
            if len(key) < MIN_SEGMENT_TOKENS or key in keys_here:
                continue
            keys_here.add(key)
            seen[key].append(item)
            first_text.setdefault(key, sentence)
    out = [
        {"text": first_text[key][:200], "count": len(hits), "positions": [h.position for h in hits]}
        for key, hits in seen.items()
        if len(hits) >= 2
    ]
    out.sort(key=lambda s: (-s["count"], s["positions"][0]))
    return out[:MAX_SEGMENTS]


class Repetition(MetricBase):
    """Thread-scope lexical repetition between assistant replies (V5− labels)."""

    name = NAME
    version = VERSION
    tier = "deterministic"
    scopes = ("thread",)
    default_threshold = DEFAULT_THRESHOLD
    description = "Assistant replies that repeat earlier replies without progress (lexical, V5−)."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        all_replies = replies(thread)
        if not all_replies:
            return [not_applicable(NAME, "no assistant replies with text", version=VERSION)]
        items = [x for x in all_replies if len(tokens(x.text)) >= MIN_TOKENS]
        if len(items) < 2:
            return [not_applicable(NAME, f"fewer than two replies with {MIN_TOKENS}+ content words", version=VERSION)]
        repeats, neutral, top = find_repeats(items, user_text_by_turn(thread))
        label = verdict(repeats, items)
        repeated = sorted(p.repeat.position for p in repeats)
        evidence = {
            "repeated_messages": repeated,
            "repeated_turns": sorted({p.repeat.turn for p in repeats}),
            "pairs": [p.as_evidence() for p in repeats],
            "neutral_pairs": [p.as_evidence() for p in neutral],
            "max_similarity": round(top, 4),
            "repeated_segments": repeated_segments(items),
            "replies_compared": len(items),
        }
        return [
            score_result(
                NAME,
                WEIGHTS[label],
                threshold=self.spec.threshold,
                scope=Scope.THREAD,
                label=label,
                reason=_reason(label, repeats, len(items), top),
                evidence=evidence,
                version=VERSION,
            )
        ]


def _reason(label: str, repeats: list[Pair], n: int, top: float) -> str:
    if label == "none":
        return f"no reply repeats an earlier one (max similarity {top:.2f} over {n} replies)"
    near = sum(p.similarity >= NEAR_VERBATIM for p in repeats)
    tail = {
        "minor": "only loose rehashes",
        "partial": "the last reply is new",
        "mostly": "the last reply is a near-verbatim repeat",
        "fully": "the last two replies are near-verbatim repeats",
    }[label]
    return f"{len(repeats)} of {n} replies repeat an earlier one ({near} near-verbatim); {tail}"
