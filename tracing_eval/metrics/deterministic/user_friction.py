"""D5 `user_friction`: user turns that repeat themselves, show frustration, escalate or shout.

A lexical proxy for Phoenix's UserFriction. Each user turn is flagged when it repeats one of the
previous four user turns (similarity >= 0.7, 3+ content words; confirmations such as "yes, please
proceed" are not repeats), matches the frustration or escalation lexicon, or is mostly capital
letters. The thread rate is flagged / (n - 1) over the user turns after the opening one (which
cannot repeat and often carries frustration from before the conversation); score = 1 - rate.
The opening turn still gets its own per-turn result.
"""

from __future__ import annotations

import re
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.similarity import Profile, similarity
from tracing_eval.model import MetricResult, Scope, Thread, not_applicable, score_result

NAME = "user_friction"
VERSION = "1"
DEFAULT_THRESHOLD = 0.7
REPEAT = 0.7
WINDOW = 4
MIN_TOKENS = 3
SHOUT_SHARE = 0.6
SHOUT_MIN_LETTERS = 8

FRUSTRATION = re.compile(
    r"\bi (?:already|just) (?:told|said|gave|sent|provided|explained|answered|mentioned)\b"
    r"|\b(?:as i|like i) (?:said|told you|mentioned)\b"
    r"|\b(?:tell|told|ask\w*|say\w*|said|explain\w*|gave|giv\w*|sen[dt]\w*|provid\w*|answer\w*|repeat\w*|typ\w*)\b"
    r"(?:\s+\w+){0,4}\s+again\b"
    r"|\bagain[?!]|\bonce again\b|\bfor the (?:second|third|last|\d+(?:st|nd|rd|th)) time\b"
    r"|\b(?:that'?s|this is|it'?s) not what i (?:asked|said|wanted|meant)\b|\bnot what i asked\b"
    r"|\bare you (?:even )?(?:listening|reading)\b(?!\s+to\b(?!\s+me\b))"
    r"|\byou(?:'re| are) not (?:listening|helping|helpful|understanding)\b"
    r"|\byou (?:don'?t|do not|didn'?t|did not) (?:understand|get it|listen|read)\b"
    r"|\b(?:useless|ridiculous|pathetic|frustrat\w*|annoy\w*|waste of (?:my )?time|stupid|terrible|horrible|awful"
    r"|unacceptable)\b"
    r"|\b(?:never ?mind|forget it)\b|\bwhat\?{2,}"
    r"|\b(?:speak|talk|chat|connect|transfer|put)\w*\s+(?:me\s+)?(?:to|with)\s+(?:a|an|the|some|your)?\s*"
    r"(?:real\s+|live\s+)?(?:human|person|agent|representative|rep|manager|supervisor|operator|someone)\b"
    r"|^\s*(?:an?\s+)?(?:human|real person|live agent|agent|representative|supervisor|manager)(?:\s+please)?"
    r"\s*[!?.]*\s*$"
    r"|!{3,}|\?{3,}",
    re.IGNORECASE,
)
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
#: confirmations repeat by nature ("yes, please proceed"); they are not the user repeating a request
_CONFIRMATION = re.compile(
    r"^\W*(?:yes|yeah|yep|sure|ok(?:ay)?|correct|confirm(?:ed)?|that'?s (?:right|correct)|please proceed|go ahead"
    r"|no)\b",
    re.IGNORECASE,
)


def shouting(text: str) -> bool:
    """Mostly capital letters, ignoring ids (words with digits) and short acronyms (ID, OK, USA)."""
    kept = [w for w in text.split() if not _DIGIT.search(w) and not (len(w) <= 3 and w.isupper())]
    letters = _LETTER.findall(" ".join(kept))
    if len(letters) < SHOUT_MIN_LETTERS:
        return False
    upper = sum(ch.isupper() for ch in letters)
    return upper / len(letters) >= SHOUT_SHARE


def flags_for(text: str, earlier: list[Profile], profile: Profile) -> list[str]:
    out: list[str] = []
    if (
        len(profile) >= MIN_TOKENS
        and not _CONFIRMATION.match(text)
        and any(len(p) >= MIN_TOKENS and similarity(p, profile) >= REPEAT for p in earlier[-WINDOW:])
    ):
        out.append("repeat")
    if FRUSTRATION.search(text):
        out.append("frustration")
    if shouting(text):
        out.append("shouting")
    return out


class UserFriction(MetricBase):
    """Per user turn friction flags and the thread's friction rate."""

    name = NAME
    version = VERSION
    tier = "deterministic"
    scopes = ("turn", "thread")
    needs_answer = False
    default_threshold = DEFAULT_THRESHOLD
    description = "User turns that repeat an earlier request, show frustration, ask for a human or shout."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        user_turns = [(t.index, t.user_text) for t in thread.turns if t.user_text.strip()]
        if not user_turns:
            return [not_applicable(NAME, "no user messages", version=VERSION)]
        results: list[MetricResult] = []
        earlier: list[Profile] = []
        flagged_after_first: list[int] = []
        per_turn: list[dict[str, Any]] = []
        for k, (index, text) in enumerate(user_turns):
            profile = Profile.of(text)
            flags = flags_for(text, earlier, profile)
            earlier.append(profile)
            if flags and k > 0:
                flagged_after_first.append(index)
            if flags:
                per_turn.append({"turn": index, "flags": flags})
            results.append(
                score_result(
                    NAME,
                    0.0 if flags else 1.0,
                    threshold=self.spec.threshold,
                    scope=Scope.TURN,
                    turn_index=index,
                    label="friction" if flags else "none",
                    reason=("user turn shows " + ", ".join(flags)) if flags else "no friction signal",
                    evidence={"flags": flags, "counted_in_rate": k > 0},
                    version=VERSION,
                )
            )
        if len(user_turns) < 2:
            results.append(not_applicable(NAME, "fewer than two user turns", version=VERSION))
            return results
        rate = len(flagged_after_first) / (len(user_turns) - 1)
        results.append(
            score_result(
                NAME,
                1.0 - rate,
                threshold=self.spec.threshold,
                scope=Scope.THREAD,
                label="friction" if flagged_after_first else "none",
                reason=f"{len(flagged_after_first)} of {len(user_turns) - 1} follow-up user turns show friction",
                evidence={
                    "friction_rate": round(rate, 4),
                    "flagged_turns": flagged_after_first,
                    "flags": per_turn,
                    "user_turns": len(user_turns),
                },
                version=VERSION,
            )
        )
        return results
