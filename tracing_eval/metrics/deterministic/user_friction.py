"""D5 `user_friction`: user messages that show dissatisfaction with the assistant reply before them.

Friction is what people rate as dissatisfaction (see `friction_cues`): the user corrects a detail the
reply got wrong or disputes it (`correction`), reminds the assistant of something already said
(`reminder`), asks it to try again after it failed (`retry`), repeats one of their last two requests
(`repeat`: the same content words, Jaccard >= 0.75, 3+ words; confirmations, closings, declines and
asks for other options never repeat),
shows annoyance at the assistant (`frustration`), asks for a human without being offered one
(`escalation`), or writes mostly in capitals (`shouting`, not for thanks). Exclamation marks, thanks,
closings and declined offers are not friction. The lexicon is English: a message in another language
or script is `not_applicable` for its turn (`languages.uncovered_language`).

The opening message reacts to no reply, so it is never flagged. The thread rate is flagged / (n - 1)
over the follow-up user turns; score = 1 - rate. On human labels the per-turn flag is advisory (see
docs/metrics.md): precision stays below the bar for routing a thread to review on its own.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic import friction_cues as cues
from tracing_eval.metrics.deterministic.languages import uncovered_language
from tracing_eval.metrics.deterministic.lexicons import LANGUAGE_WORDS, OTHER_LANGUAGE_WORDS, STOP_WORDS
from tracing_eval.metrics.deterministic.similarity import stem
from tracing_eval.metrics.deterministic.similarity import words as all_words
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread, Turn

DEFAULT_THRESHOLD = 0.7
REPEAT = 0.75
WINDOW = 2
MIN_TOKENS = 3
SHOUT_SHARE = 0.6
SHOUT_MIN_LETTERS = 8
#: flags in the order they are reported
FLAGS = ("correction", "reminder", "retry", "repeat", "frustration", "escalation", "shouting")

_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
#: upper-case letters (any script with case): a cheap first test for shouting
_UPPER = re.compile(r"[^\W\d_a-z\u00df-\u00ff]")
#: code the user quotes: a span in backticks, or an SQL statement in capitals (keywords are not shouting)
_CODE = re.compile(
    r"`[^`]*`|\bSELECT\b[^;\n]*?\bFROM\b[^;\n]*|\b(?:INSERT INTO|DELETE FROM|(?:CREATE|ALTER|DROP) TABLE)\b[^;\n]*"
    r"|\bUPDATE\s+\w+\s+SET\b[^;\n]*"
)
#: a character inside a word that makes it an identifier or a path (`DATABASE_URL`, `/API/USERS`, `os.environ`)
_IDENTIFIER = re.compile(r"[_/=.()\[\]{}@$\\]")
#: function words of the languages other than English (a cheap first test for `other_language`)
_FOREIGN_WORDS = frozenset().union(*(w for k, w in {**LANGUAGE_WORDS, **OTHER_LANGUAGE_WORDS}.items() if k != "en")) - (
    LANGUAGE_WORDS["en"] | STOP_WORDS
)
#: the language of the lexicon
COVERED = ("en",)
#: every cue of `friction_cues` needs one of these words (as `similarity.words` spells them): a message
#: with none of them can only be a `repeat` or `shouting` (keep in step with the cue patterns)
CUE_WORDS = frozenset(
    """
    no nope nah negative not isnt wasnt arent werent wrong incorrect mistaken misunderstood misheard misread
    mixed mistake error misunderstanding mixup mix confusion never didnt did sure cant dont wont doesnt wouldnt
    already just said told asked mentioned explained wrote again time recheck retry double re harder keep
    useless pathetic incompetent hopeless stupid dumb frustrating annoying ridiculous absurd unacceptable
    unhelpful helpful helping joke waste kidding joking serious listening reading understanding sense understand
    get listen read help give frustrated annoyed irritated angry upset tired fail failed
    human person agent representative rep manager supervisor operator someone
    seriously stop repeating answer answering answered transfer connect taking times hard difficult complicated
    why lying lied obsessed same wtf ffs
    useful suggested recommended showed offered still myself hello hey hi anyone anybody
    false untrue broke broken worse ignored ignoring wasting pointless come ugh argh smh omfg jeez geez sigh sake
    customer made making nothing confused confusing
    """.split()
)
#: confirmations repeat by nature ("yes, please proceed"); they are not the user repeating a request
_CONFIRMATION = re.compile(
    r"^\W*(?:yes|yeah|yep|yup|sure|ok(?:ay)?|alright|correct|confirm(?:ed)?|that'?s (?:right|correct)|sounds? good"
    r"|looks? good|perfect|great|please proceed|go ahead|no)\b",
    re.IGNORECASE,
)
#: asking for other options again is browsing, not a repeated request
_ALTERNATIVES = re.compile(r"\b(?:other|another|else|more|different|alternatives?|next)\b", re.IGNORECASE)
#: a reply that asks the user to give or confirm something: answering it again is not a repeat
_CONFIRM_OR_AGAIN = re.compile(r"\bconfirm\b|\bagain\b", re.IGNORECASE)
#: A verb that asks for something again, in a clause that ends with a question mark.
_ASK_VERB = re.compile(r"\b(?:provide|repeat|re-?enter|say|tell me|give me|spell)\b", re.IGNORECASE)
#: A clause ending in "?", read from its start only (scanning on from every verb in a long clause
#: would cost its square).
_QUESTION_CLAUSE = re.compile(r"(?<![^.?!])[^.?!]*+\?")


def asks_again(reply: str) -> bool:
    """The reply asks the user to confirm, repeat or give something again."""
    return bool(_CONFIRM_OR_AGAIN.search(reply) or any(_ASK_VERB.search(c) for c in _QUESTION_CLAUSE.findall(reply)))


def shouting(text: str) -> bool:
    """Mostly capital letters, ignoring ids (words with digits), short acronyms (ID, OK, USA), identifiers
    (`AWS_SECRET_KEY`, `/API/USERS`), code in backticks, SQL statements and thanks."""
    if len(_UPPER.findall(text)) < SHOUT_MIN_LETTERS or cues.CLOSING.search(text):
        return False
    text = _CODE.sub(" ", text)
    kept = [
        w
        for w in text.split()
        if not _DIGIT.search(w)
        and not (len(w) <= 3 and w.isupper())
        and not _IDENTIFIER.search(w.strip(".,;:!?'\"()/"))
    ]
    letters = _LETTER.findall(" ".join(kept))
    if len(letters) < SHOUT_MIN_LETTERS:
        return False
    upper = sum(map(str.isupper, letters))
    return upper / len(letters) >= SHOUT_SHARE


def repeats_a_request(text: str, reply: str, earlier: list[frozenset[str]], words: frozenset[str]) -> bool:
    """The message says again what one of the last two user messages said, unprompted."""
    if len(words) < MIN_TOKENS:
        return False
    if not any(len(w) >= MIN_TOKENS and len(w & words) / len(w | words) >= REPEAT for w in earlier[-WINDOW:]):
        return False
    if _CONFIRMATION.match(text) or cues.CLOSING.search(text) or cues.DECLINE.search(text):
        return False
    return not (_ALTERNATIVES.search(text) or (reply and asks_again(reply)))


def flags_for(
    text: str, reply: str, earlier: list[frozenset[str]], words: frozenset[str], plain: frozenset[str] | None = None
) -> list[str]:
    """Friction flags of a follow-up user message, given the reply it answers and the earlier messages.
    `words` are its content tokens, `plain` all its words (to skip the cue patterns when none can match)."""
    text, reply = text.replace("\u2019", "'"), reply.replace("\u2019", "'")  # typographic apostrophes
    if plain is not None and plain.isdisjoint(CUE_WORDS):  # most messages
        found = dict.fromkeys(FLAGS, False)
        found["repeat"] = repeats_a_request(text, reply, earlier, words)
        found["shouting"] = shouting(text)
        return [f for f in FLAGS if found[f]]
    low = text.lower() if text.isascii() else None  # lower-cased once for the cues that take it
    found = {
        "correction": cues.reads(cues.DISPUTE, cues.DISPUTE_NEEDS, text, low)
        or cues.says_no_to_a_detail(text, reply)
        or cues.replaces_a_stated_value(text, reply),
        "reminder": cues.reads(cues.REMINDER, cues.REMINDER_NEEDS, text, low),
        "retry": cues.retries_after_failure(text, reply),
        "repeat": repeats_a_request(text, reply, earlier, words),
        "frustration": cues.reads(cues.ANNOYANCE, cues.ANNOYANCE_NEEDS, text, low),
        "escalation": cues.asks_for_a_human(text, reply),
        "shouting": shouting(text),
    }
    return [f for f in FLAGS if found[f]]


def other_language(text: str, plain: frozenset[str] | None = None) -> str | None:
    """Why the English lexicon cannot read a message (`languages.uncovered_language`), or None."""
    if text.isascii() and (plain if plain is not None else frozenset(all_words(text))).isdisjoint(_FOREIGN_WORDS):
        return None  # English, or too little to tell: no function word of another language
    return uncovered_language(text, COVERED)


@lru_cache(maxsize=4096)  # a thread still active is read again each time one of its turns settles
def user_words(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A user message's distinct words, and its content words stemmed (what `repeat` compares); tuples
    of strings, which the garbage collector stops tracking, so a full cache adds little to a collection."""
    plain = frozenset(all_words(text))
    return tuple(plain), tuple(frozenset(map(stem, plain - STOP_WORDS)))


class UserFriction(MetricBase):
    """Per user turn friction flags and the thread's friction rate."""

    name = "user_friction"
    version = "9"
    tier = "deterministic"
    scopes = ("turn", "thread")
    needs_answer = False
    default_threshold = DEFAULT_THRESHOLD
    description = (
        "User messages that correct or dispute the reply, remind, retry after a failure, repeat a request, "
        "show annoyance, ask for a human or shout."
    )

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        user_turns = [t for t in thread.turns if t.user_text.strip()]
        if not user_turns:
            return [not_applicable(self.spec, "no user messages")]
        results = self._turn_results(thread, user_turns, 0)
        counted = sum(bool(r.evidence.get("counted_in_rate")) for r in results)
        per_turn = [{"turn": r.turn_index, "flags": r.evidence["flags"]} for r in results if r.evidence.get("flags")]
        if counted == 0:
            results.append(not_applicable(self.spec, "fewer than two user turns in a covered language"))
            return results
        rate = len(per_turn) / counted
        results.append(
            ok(
                self.spec,
                1.0 - rate,
                label="friction" if per_turn else "none",
                reason=f"{len(per_turn)} of {counted} follow-up user turns show friction",
                evidence={
                    "friction_rate": round(rate, 4),
                    "flagged_turns": [f["turn"] for f in per_turn],
                    "flags": per_turn,
                    "user_turns": len(user_turns),
                },
            )
        )
        return results

    def evaluate_from(self, thread: Thread, first: int) -> list[MetricResult]:
        """A user turn's flags read it, the reply before it and the user's earlier words: the earlier
        turns give only their words."""
        return self._turn_results(thread, [t for t in thread.turns if t.user_text.strip()], first)

    def _turn_results(self, thread: Thread, user_turns: list[Turn], first: int) -> list[MetricResult]:
        """The result of each user turn from `first` on."""
        results: list[MetricResult] = []
        earlier: list[frozenset[str]] = []
        for k, turn in enumerate(user_turns):
            text = turn.user_text
            distinct, content = user_words(text)
            plain, words = frozenset(distinct), frozenset(content)
            if turn.index < first:
                earlier.append(words)
                continue
            language = other_language(text, plain)
            if language is not None:
                earlier.append(words)
                results.append(
                    not_applicable(self.spec, f"{language}: the friction lexicon is English", turn_index=turn.index)
                )
                continue
            reply = thread.turns[turn.index - 1].assistant_text if turn.index > 0 else ""
            flags = [] if k == 0 else flags_for(text, reply, earlier, words, plain)
            earlier.append(words)
            results.append(
                ok(
                    self.spec,
                    0.0 if flags else 1.0,
                    turn_index=turn.index,
                    label="friction" if flags else "none",
                    reason=("user turn shows " + ", ".join(flags))
                    if flags
                    else ("the opening message reacts to no reply" if k == 0 else "no friction signal"),
                    evidence={"flags": flags, "counted_in_rate": k > 0},
                )
            )
        return results
