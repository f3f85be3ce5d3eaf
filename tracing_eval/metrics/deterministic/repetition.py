"""D1 `repetition`: assistant replies that repeat what an earlier reply said, on the seed's V5− scale.

The unit is the sentence (`tracing_eval.text.sentence_words`, any script). A sentence is its
content tokens (word units of any script, stop-words dropped, stemmed; every number or code becomes
`#`, so "ticket 48213" and "ticket 48391" read the same); a short one (2-3 content tokens) is all its
words and matches only a sentence with the same content about the same person ("do you like to
travel?" is not repeated by "i do like to travel."). A sentence of reply j matches one of the
W previous replies' when their word-level Indel ratio is >= 0.8, and any earlier reply's when it
says that sentence again word for word (numbers included). Reply j then:

- repeats near-verbatim when matched sentences cover >= 0.8 of its tokens, or the whole reply is
  >= 0.8 similar to an earlier one;
- repeats in part when a matched sentence has 4+ tokens or matches cover half of the reply;
- rehashes when, short of that, one of its sentences rewords an earlier one (ratio >= 0.5 and
  3+ shared tokens once the words the user just brought up are set aside).

A short reply with no compared sentence (4+ words, one content token: "Do you have a Pikachu?")
repeats near-verbatim when any earlier reply said it word for word.

A sentence holding a courtesy formula ("let me know if there is anything else") is not counted.
A match with an earlier reply is neutral, not a repeat, when
- the user asked the same thing again and this is the first re-answer (a third identical answer to
  the same question is a repeat);
- the user asked for it ("say that again", "summarise");
- reply j has a number or code, or two words of 3+ characters, that the earlier reply lacks and
  the user or a tool brought up since (one confirmation template used for two requests is two answers).

Verdict, weighing the end of the thread: `minor` partial repeats only; `partial` a near-verbatim
repeat, then recovery, or a single one among many replies; `mostly` the last reply repeats
near-verbatim and repeats are frequent (two near-verbatim, or a quarter of the replies);
`fully` the last two replies repeat near-verbatim.
Each sentence is compared with the sentences of a bounded window of replies (one rapidfuzz call
over token sequences encoded one character per token) and looked up among the earlier ones said
word for word, so the cost grows linearly with the thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain, filterfalse
from typing import Any

from rapidfuzz import process
from rapidfuzz.distance import Indel

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.lexicons import STOP_WORDS
from tracing_eval.metrics.deterministic.similarity import stem, tokens
from tracing_eval.metrics.deterministic.tool_errors import canonical_args
from tracing_eval.metrics.deterministic.views import Located, replies
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread, Turn
from tracing_eval.text import could_match, sentence_words, sentences, word_units

DEFAULT_THRESHOLD = 0.7

#: The seed's inverted verdict scale (RepetitivePatternDetection): higher is better.
WEIGHTS: dict[str, float] = {"none": 1.0, "minor": 0.9, "partial": 0.7, "mostly": 0.3, "fully": 0.0}

WINDOW = 6
SENTENCE_MATCH = 0.8
NEAR_VERBATIM = 0.8
PART_SHARE = 0.5
PART_SENTENCE_TOKENS = 4
MIN_SENTENCE_TOKENS = 2
LONG_SENTENCE_TOKENS = 4
MIN_SHORT_SENTENCE_WORDS = 4
FREQUENT = 0.25
REHASH = 0.5
MIN_SHARED = 3
TOPIC_TURNS = 3
SAME_QUESTION = 0.8
USER_WINDOW = 6
#: rapidfuzz applies a `score_cutoff` in distance terms, where a similarity of exactly the
#: threshold (4 of 5 words alike: 0.8) can round out; cutoffs are passed this much lower
CUTOFF_SLACK = 1e-6
#: what the user or a tool brought up in this many turns before a reply can make it a new answer
SINCE_TURNS = 12
MAX_SEGMENTS = 20
NEUTRAL_KINDS = ("same_question", "requested", "new_details")
#: Bounds that keep one huge reply linear: a reply's first MAX_COMPARED sentences are compared (its
#: later ones are not), by their first MAX_SENTENCE_TOKENS tokens, and the whole reply by its first
#: MAX_WHOLE_TOKENS (a user message too, where two are compared). A sentence is scored against every
#: sentence of the window, so without them a reply of 20,000 short sentences, or one of 100,000 words
#: and no stop, costs its size squared. Far above what replies hold (the shared datasets: 23
#: sentences, 83 tokens a sentence, 150 a reply).
MAX_COMPARED = 200
MAX_SENTENCE_TOKENS = 200
MAX_WHOLE_TOKENS = 2000
#: Below this share of English function words among the replies' words, the stop-word list and
#: stemming do not apply (another language or script): verbatim repeats are still found, paraphrase
#: closeness is not, and the judge gate treats the thread as uncovered.
COVERED_FUNCTION_WORDS = 0.12

_DIGIT = re.compile(r"\d")
#: The user asks for a restatement: repeating is then what was wanted.
_RESTATE = re.compile(
    r"\b(?:repeat|recap|summari[sz]e|restate|remind me|come again|once more|one more time"
    r"|(?:say|tell|explain|send|give|list|show|read|go over|check|confirm)\b[^.?!]{0,30}\bagain"
    r"|double[- ]?check|confirm (?:it|that|this) (?:to|for) me"
    r"|what (?:did|was it) you (?:just )?sa(?:y|id)|repite|repetir|otra vez|wiederhol|noch ?(?:ein)?mal"
    r"|r[ée]p[ée]t|encore une fois)\b|再说一遍|重复一下|もう一度|繰り返",
    re.I,
)
#: Every match of `_RESTATE` on ASCII text holds one of these (lower case).
_RESTATE_NEEDS = tuple(
    (
        "again|repeat|recap|summari|restate|remind me|once more|one more time|double|confirm|what "
        "|repite|repetir|otra vez|wiederhol|noch|repet|encore une fois"
    ).split("|")
)

#: Courtesy formulas (English) that a good assistant says again and again; a sentence holding one
#: ("If there's anything else, feel free to let me know!") is no repeat of the one before.
_FORMULA = re.compile(
    r"\b(?:let me know|anything else|feel free|happy to help|glad to help|hope (?:this|that) helps"
    r"|have a (?:great|nice|good|wonderful|safe) (?:day|one|trip|flight|evening|night|weekend)|youre welcome"
    r"|something else|what else can i (?:do|help)|(?:any|some) other help|need (?:any )?more help"
    r"|further (?:assistance|questions|help)|any (?:other|more|further) questions"
    r"|thank you for (?:your patience|contacting|reaching out|choosing|waiting))\b"
    # an apology that is the whole sentence (inside a longer one it can carry a repeated denial)
    r"|^(?:(?:i|we)\s+(?:apologi[sz]e|am sorry|are sorry)|im sorry|were sorry|sorry|apologies|my apologies)\s+for\s+"
    r"(?:the|any)\s+(?:inconvenience|confusion|trouble|delay)$|^i\s+(?:completely\s+)?understand\s+your\s+frustration$"
)


#: Every formula holds one of these as a whole word unit (units are runs of word characters, so the
#: pattern's `\b`-bounded words are whole units): a sentence with none of them holds no formula.
_FORMULA_WORDS = frozenset(
    "know else free help helps have welcome further questions thank inconvenience confusion trouble delay"
    " frustration".split()
)


def courtesy(words: list[str]) -> bool:
    """True for a sentence (as word units) that holds a courtesy formula."""
    return not _FORMULA_WORDS.isdisjoint(words) and bool(_FORMULA.search(" ".join(words)))


@dataclass
class Reply:
    """One assistant reply prepared for comparison."""

    item: Located
    sentences: list[list[str]]  # the word units of each sentence
    keys: list[list[str]]  # what each sentence is compared by (empty when too short)
    units: list[str]  # each key encoded one character per token
    exact: list[tuple[str, ...]]  # what a short sentence's match must share: content, person (() for long ones)
    whole: str
    raw: frozenset[str]  # content tokens as written, numbers and codes kept
    words: int  # word units, stop-words included
    content: int  # content tokens
    echo: str = ""  # a short reply with no compared sentence, word for word ("" when it has one)
    calls: frozenset[str] = frozenset()  # content tokens of the arguments of the tool calls it makes

    @property
    def size(self) -> int:
        return sum(map(len, self.units))


@dataclass
class Pair:
    """Reply `repeat` repeats (or, when neutral, harmlessly echoes) `first`."""

    first: Located
    repeat: Located
    similarity: float
    share: float
    kind: str  # near_verbatim | sentence | rehash | same_question | requested | new_details
    earlier: list[int] = field(default_factory=list)

    def as_evidence(self) -> dict[str, Any]:
        return {
            "first_turn": self.first.turn,
            "repeat_turn": self.repeat.turn,
            "first_position": self.first.position,
            "repeat_position": self.repeat.position,
            "earlier_positions": self.earlier,
            "similarity": self.similarity,
            "share": self.share,
            "kind": self.kind,
        }


@dataclass
class Analysis:
    repeats: list[Pair]
    neutral: list[Pair]
    max_similarity: float
    max_sentence_similarity: float
    segments: list[dict[str, Any]]
    language_covered: bool
    compared: list[Located]
    wordy: int  # compared replies with two or more content tokens (the rest are short replies)


def encode_all(keys: list[list[str]]) -> list[str]:
    """Each token list as a string of one character per distinct token (the same token, the same
    character), so rapidfuzz compares token sequences as short strings. Characters are numbered from 0:
    a thread of up to 256 distinct tokens gives one-byte strings, which rapidfuzz compares fastest."""
    distinct = dict.fromkeys(chain.from_iterable(keys))
    codes = dict(zip(distinct, map(chr, range(len(distinct))), strict=True))
    get = codes.__getitem__
    return ["".join(map(get, key)) for key in keys]


def _hash_numbers(toks: list[str]) -> list[str]:
    """Every token holding a digit as `#`."""
    joined = "".join(toks)
    if joined.isalpha() or not _DIGIT.search(joined):  # letters only: no digit to look for
        return toks
    return [t if t.isalpha() or not _DIGIT.search(t) else "#" for t in toks]


#: English personal pronouns (apostrophes dropped) -> the person a short sentence is about
_PERSON: dict[str, str] = dict.fromkeys("i me my mine myself im ive".split(), "1") | dict.fromkeys(
    "you your yours yourself youre youve youd youll u ur".split(), "2"
)


def sentence_key(written: list[str]) -> tuple[list[str], tuple[str, ...], list[str], int]:
    """From a sentence's word units: what it is compared by, the content a short one must share
    exactly, its content tokens as written, and its number of words.

    A sentence with 4+ content tokens is compared by them. A shorter one ("do you like cars?") is
    compared by all its words, stop-words included, and matches only a sentence with the same
    content tokens, so that two short sentences match only when worded alike about the same thing,
    and not when one speaks only of the user and the other only of the speaker ("i do like cars"
    answers the question; `_alike`).
    A sentence with fewer than two content tokens or four words ("sleep tight") is not compared.
    """
    raw = list(map(stem, filterfalse(STOP_WORDS.__contains__, written)))
    content = _hash_numbers(raw)
    if len(content) >= LONG_SENTENCE_TOKENS:
        return content, (), raw, len(written)
    if len(content) < MIN_SENTENCE_TOKENS or len(written) < MIN_SHORT_SENTENCE_WORDS:
        return [], (), raw, len(written)
    person = "".join(sorted({_PERSON[w] for w in written if w in _PERSON}))
    return _hash_numbers(list(map(stem, written))), (*sorted(content), person), raw, len(written)


def _alike(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two sentences may match (`sentence_key`'s exact parts): long ones (`()`) always, short
    ones with the same content, unless one speaks only of the user and the other only of the speaker."""
    if not a or not b:
        return a == b
    return a[:-1] == b[:-1] and {a[-1], b[-1]} != {"1", "2"}


def prepare(items: list[Located]) -> list[Reply]:
    """Each reply's sentences, their encoded keys and the reply's tokens, tokenising each sentence once."""
    parts = []
    keys: list[list[str]] = []
    for item in items:
        sents = sentence_words(item.text)
        exact, raw = [], []
        words = compared = 0
        for written in sents:
            key, content, tokens_written, n = sentence_key(written)
            if key:
                compared += 1
                key = key[:MAX_SENTENCE_TOKENS] if compared <= MAX_COMPARED else []
            keys.append(key)
            exact.append(content)
            raw += tokens_written
            words += n
        whole = _hash_numbers(raw)
        keys.append(whole[:MAX_WHOLE_TOKENS] if len(whole) >= LONG_SENTENCE_TOKENS else [])
        echo = ""
        if not compared and raw and words >= MIN_SHORT_SENTENCE_WORDS and not any(map(courtesy, sents)):
            echo = " ".join(chain.from_iterable(sents))
        parts.append((item, sents, keys[-len(sents) - 1 : -1], exact, raw, words, echo))
    encoded = encode_all(keys)
    out = []
    at = 0
    for item, sents, sentence_keys, exact, raw, words, echo in parts:
        end = at + len(sents)
        out.append(
            Reply(
                item,
                sents,
                sentence_keys,
                encoded[at:end],
                exact,
                encoded[end],
                frozenset(raw),
                words,
                len(raw),
                echo,
                _call_tokens(item),
            )
        )
        at = end + 1
    return out


def _call_tokens(item: Located) -> frozenset[str]:
    """Content tokens of the arguments of the reply's tool calls ("Let me check that for you." with
    another order id is another action, not a repeat)."""
    calls = item.message.tool_calls
    if not calls:
        return frozenset()
    texts = (c.arguments if isinstance(c.arguments, str) else canonical_args(c.arguments) for c in calls)
    return frozenset(tokens(" ".join(texts)))


def covered_language(prepared: list[Reply]) -> bool:
    """True when the replies read as English, the language of the stop-words and stemming."""
    words = sum(r.words for r in prepared)
    return bool(words) and (words - sum(r.content for r in prepared)) / words >= COVERED_FUNCTION_WORDS


@dataclass
class Context:
    """What the user (and tools) said, by turn, for the neutral cases."""

    user: dict[int, str]
    turns: dict[int, Turn]
    asked: list[int] = field(default_factory=list)  # the turns whose user message has text, in order
    _inputs: dict[int, frozenset[str]] = field(default_factory=dict)
    _topics: dict[int, frozenset[str]] = field(default_factory=dict)
    _user_tokens: dict[int, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, thread: Thread) -> Context:
        said = [(t.index, t.user_text) for t in thread.turns]
        return cls(dict(said), {t.index: t for t in thread.turns}, [i for i, text in said if text.strip()])

    def user_tokens(self, turn: int) -> tuple[str, ...]:
        found = self._user_tokens.get(turn)
        if found is None:
            found = self._user_tokens[turn] = tuple(tokens(self.user.get(turn, "")))[:MAX_WHOLE_TOKENS]
        return found

    def inputs(self, turn: int) -> frozenset[str]:
        """Content tokens of the turn's user and tool messages (computed when first needed)."""
        found = self._inputs.get(turn)
        if found is None:
            t = self.turns.get(turn)
            messages = t.messages if t is not None else []
            found = self._inputs[turn] = frozenset(
                tok for m in messages if m.role in ("user", "tool") and m.content for tok in tokens(m.content)
            )
        return found

    def same_question(self, a: int, b: int) -> bool:
        ua, ub = self.user.get(a, ""), self.user.get(b, "")
        if a == b or not ua.strip() or not ub.strip():
            return False
        ta, tb = self.user_tokens(a), self.user_tokens(b)
        if ta == tb:
            return bool(ta) or ua.strip().lower() == ub.strip().lower()
        return Indel.normalized_similarity(ta, tb) >= SAME_QUESTION

    def topic(self, turn: int) -> frozenset[str]:
        """Content tokens of the user's last few messages up to `turn`: echoing them is not repeating."""
        found = self._topics.get(turn)
        if found is None:
            found = self._topics[turn] = frozenset(
                tok for t in range(turn - TOPIC_TURNS, turn + 1) for tok in self.user_tokens(t)
            )
        return found

    def requested(self, turn: int) -> bool:
        text = self.user.get(turn, "")
        return could_match(text, _RESTATE_NEEDS) and bool(_RESTATE.search(text))

    def brought_up(self, among: frozenset[str], first: Located, later: Located) -> frozenset[str]:
        """Which of `among` the user or a tool brought up after `first`, up to `later`'s turn and
        within its last `SINCE_TURNS` turns (a repeat of a reply far back answers a recent request)."""
        if not among:
            return among
        if later.turn <= first.turn:
            return among & self.inputs(later.turn)
        found: frozenset[str] = frozenset()
        for t in range(max(first.turn, later.turn - SINCE_TURNS) + 1, later.turn + 1):
            found |= self.inputs(t)
        return among & found


def _neutral_kind(first: Reply, later: Reply, ctx: Context, answers_to_same: int) -> str | None:
    """Why a match of `later` with `first` is not a repeat, or None when it is one."""
    if ctx.requested(later.item.turn):
        return "requested"
    # character pairs of spaceless scripts are too small to show what the user brought up: words of
    # three or more characters, numbers and codes do
    said = (later.raw - first.raw) | (later.calls - first.calls)  # words against words, calls against calls
    new = [t for t in ctx.brought_up(said, first.item, later.item) if len(t) >= 3 or _DIGIT.search(t)]
    if len(new) >= 2 or any(_DIGIT.search(t) for t in new):
        return "new_details"
    if ctx.same_question(first.item.turn, later.item.turn) and answers_to_same < 2:
        return "same_question"
    return None


def analyse(items: list[Located], ctx: Context, window: int = WINDOW) -> Analysis:
    """Find repeating replies: sentence matches against the previous `window` replies, and
    sentences said word for word in any reply before them.

    A short reply with no compared sentence ("Do you have a Pikachu?") repeats when an earlier reply
    said it word for word. Other replies with fewer than two content tokens are left out (`compared`
    lists the rest)."""
    prepared = [r for r in prepare(items) if r.content >= MIN_SENTENCE_TOKENS or r.echo]
    repeats: list[Pair] = []
    neutral: list[Pair] = []
    top = top_sentence = 0.0
    same_answers: dict[int, int] = {}  # reply index -> how many times its answer was given to one question
    segments: dict[str, list[int]] = {}
    segment_text: dict[str, tuple[str, list[str]]] = {}
    # every compared sentence of every reply, in order; a window of replies is a slice of these
    flat_owners = [k for k, r in enumerate(prepared) for u in r.units if u]
    flat_units = [u for r in prepared for u in r.units if u]
    flat_exacts = [e for r in prepared for u, e in zip(r.units, r.exact, strict=True) if u]
    flat_keys = [k for r in prepared for u, k in zip(r.units, r.keys, strict=True) if u]
    starts = [0]
    for r in prepared:
        starts.append(starts[-1] + sum(1 for u in r.units if u))
    said: dict[str, int] = {}  # a compared sentence, word for word -> the last reply that said it
    echoed: dict[str, int] = {}  # a short reply, word for word -> the last reply that said it
    for j, reply in enumerate(prepared):
        lo = max(0, j - window)
        earlier = prepared[lo:j]
        a, b = starts[lo], starts[j]
        owners, choices, exacts, choice_keys = flat_owners[a:b], flat_units[a:b], flat_exacts[a:b], flat_keys[a:b]
        matched: dict[int, set[int]] = {}  # earlier reply index -> which sentences of `reply` it matches
        rehash: dict[int, float] = {}  # earlier reply index -> similarity of a reworded sentence
        best_sim: dict[int, float] = {}
        spoken: list[str] = []  # this reply's compared sentences, word for word
        position = reply.item.position
        for i, (sentence, key, unit, exact) in enumerate(
            zip(reply.sentences, reply.keys, reply.units, reply.exact, strict=True)
        ):
            if not unit:
                continue
            seen = segments.get(unit)
            if seen is None:
                segments[unit] = [position]
                segment_text[unit] = (reply.item.text, sentence)
            elif seen[-1] != position:
                seen.append(position)
            as_said = " ".join(sentence)
            spoken.append(as_said)
            far = said.get(as_said, j)
            if far < lo and not courtesy(sentence):  # said word for word before the window
                matched.setdefault(far, set()).add(i)
                best_sim[far] = top_sentence = 1.0
            if not choices:
                continue
            best = process.extractOne(unit, choices, scorer=Indel.normalized_similarity)
            if best is None:
                continue
            _, score, at = best
            if score > top_sentence:
                top_sentence = score
            if score < REHASH:
                continue
            if courtesy(sentence):
                continue
            if score < SENTENCE_MATCH:
                if not exact and _rehash(key, choice_keys[at], reply.item, ctx):
                    rehash.setdefault(owners[at], score)
                continue
            hits = [
                h
                for h in process.extract(
                    unit,
                    choices,
                    scorer=Indel.normalized_similarity,
                    score_cutoff=SENTENCE_MATCH - CUTOFF_SLACK,
                    limit=None,
                )
                if _alike(exact, exacts[h[2]])
            ]
            for k in {owners[h[2]] for h in hits}:
                matched.setdefault(k, set()).add(i)
                best_sim[k] = max(best_sim.get(k, 0.0), max(h[1] for h in hits if owners[h[2]] == k))
        whole_best: tuple[int, float] | None = None
        if reply.whole and earlier:
            hit = process.extractOne(reply.whole, [r.whole for r in earlier], scorer=Indel.normalized_similarity)
            if hit is not None:
                whole_best = (lo + hit[2], hit[1])
                top = max(top, hit[1])
        said.update(dict.fromkeys(spoken, j))
        whole: tuple[int, int] | None = None  # the earlier reply this one is near-verbatim as a whole, and its tokens
        if (
            whole_best is not None
            and whole_best[1] >= NEAR_VERBATIM
            and not all(courtesy(words) for words in reply.sentences)
        ):
            k = whole_best[0]
            whole = (k, round(reply.size * whole_best[1]))
            matched.setdefault(k, set())
            best_sim[k] = max(best_sim.get(k, 0.0), whole_best[1])
        if not reply.size:
            if reply.echo:
                k = echoed.get(reply.echo, -1)
                echoed[reply.echo] = j
                if k >= 0:
                    pair = _classify(j, reply, prepared, {k: set()}, (k, reply.words), {k: 1.0}, ctx, same_answers)
                    if pair is not None:
                        (neutral if pair.kind in NEUTRAL_KINDS else repeats).append(pair)
            continue
        if not matched:
            pair = _rehash_pair(reply, prepared, rehash, ctx, same_answers) if rehash else None
            if pair is not None:
                repeats.append(pair)
            continue
        pair = _classify(j, reply, prepared, matched, whole, best_sim, ctx, same_answers)
        if pair is None:
            continue
        (neutral if pair.kind in NEUTRAL_KINDS else repeats).append(pair)
    return Analysis(
        repeats,
        neutral,
        round(top, 4),
        round(top_sentence, 4),
        _segments(segments, segment_text),
        covered_language(prepared),
        [r.item for r in prepared],
        sum(r.content >= MIN_SENTENCE_TOKENS for r in prepared),
    )


def _rehash(unit: list[str], other: list[str], item: Located, ctx: Context) -> bool:
    """A reworded sentence: 3+ shared tokens once the words the user just brought up are set aside."""
    topic = ctx.topic(item.turn)
    a = [t for t in unit if t not in topic]
    b = [t for t in other if t not in topic]
    if min(len(a), len(b)) < MIN_SHARED:
        return False
    shared = len(set(a) & set(b))
    return shared >= MIN_SHARED and Indel.normalized_similarity(a, b) >= REHASH


def _rehash_pair(
    reply: Reply, prepared: list[Reply], rehash: dict[int, float], ctx: Context, same_answers: dict[int, int]
) -> Pair | None:
    for k in sorted(rehash, key=lambda i: -rehash[i]):
        if _neutral_kind(prepared[k], reply, ctx, same_answers.get(k, 1)) is None:
            return Pair(prepared[k].item, reply.item, round(rehash[k], 4), 0.0, "rehash", [prepared[k].item.position])
    return None


def _classify(
    j: int,
    reply: Reply,
    prepared: list[Reply],
    matched: dict[int, set[int]],
    whole: tuple[int, int] | None,
    best_sim: dict[int, float],
    ctx: Context,
    same_answers: dict[int, int],
) -> Pair | None:
    """The pair for reply j: a repeat, a neutral echo, or None when the overlap is too small. Its
    share is of the reply's tokens that repeat: a sentence that several earlier replies said counts
    once (a footer said in every reply is one sentence, not the whole reply).

    `matched` gives the sentences of the reply that each earlier reply matches; `whole`, an earlier reply
    the reply as a whole is close to and the tokens that makes alike (when more than its sentences)."""
    size = reply.size or reply.words
    tokens_alike = {k: sum(len(reply.units[i]) for i in sents) for k, sents in matched.items()}
    if whole is not None:
        tokens_alike[whole[0]] = max(tokens_alike[whole[0]], whole[1])
    counted: dict[int, int] = {}
    first_neutral: tuple[int, str] | None = None
    for k, n in tokens_alike.items():
        kind = _neutral_kind(prepared[k], reply, ctx, same_answers.get(k, 1))
        if kind is None:
            counted[k] = n
        elif first_neutral is None or n > tokens_alike[first_neutral[0]]:
            first_neutral = (k, kind)
    if counted:
        k = max(counted, key=lambda i: (counted[i], best_sim[i], i))
        said_again = set().union(*(matched[i] for i in counted))
        share = min(1.0, max(sum(len(reply.units[i]) for i in said_again), max(counted.values())) / size)
        if share >= NEAR_VERBATIM:
            kind = "near_verbatim"
        elif share >= PART_SHARE or max(counted.values()) >= PART_SENTENCE_TOKENS:
            kind = "sentence"
        else:
            return None
        return Pair(
            prepared[k].item,
            reply.item,
            round(best_sim[k], 4),
            round(share, 4),
            kind,
            sorted(prepared[i].item.position for i in counted),
        )
    if first_neutral is None:
        return None
    k, kind = first_neutral
    share = min(1.0, tokens_alike[k] / size)
    if share < PART_SHARE and tokens_alike[k] < PART_SENTENCE_TOKENS:
        return None
    if kind == "same_question":
        same_answers[j] = same_answers.get(k, 1) + 1
    return Pair(prepared[k].item, reply.item, round(best_sim[k], 4), round(share, 4), kind, [prepared[k].item.position])


def _segments(positions: dict[str, list[int]], text: dict[str, tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """Sentences whose normalised form occurs in two or more replies, as first written."""
    written: dict[str, dict[tuple[str, ...], str]] = {}  # reply -> its sentences by word units
    out: list[dict[str, Any]] = []
    for u, p in positions.items():
        if len(p) < 2:
            continue
        reply, words = text[u]
        if reply not in written:
            written[reply] = _as_written(reply)
        sentence = written[reply].get(tuple(words), " ".join(words))
        out.append({"text": sentence[:200], "count": len(p), "positions": p})
    out.sort(key=lambda s: (-s["count"], s["positions"][0]))
    return out[:MAX_SEGMENTS]


def _as_written(reply: str) -> dict[tuple[str, ...], str]:
    """The sentences of `reply` as written, by their word units (the first of equal ones)."""
    out: dict[tuple[str, ...], str] = {}
    for sentence in sentences(reply):
        out.setdefault(tuple(word_units(sentence)), sentence)
    return out


def verdict(repeats: list[Pair], items: list[Located]) -> str:
    """Map repeats to none/minor/partial/mostly/fully, weighing the end of the thread."""
    if not repeats:
        return "none"
    near = {p.repeat.position for p in repeats if p.kind == "near_verbatim"}
    if not near:
        return "minor"
    last = [x.position for x in items[-2:]]
    if len(last) == 2 and all(pos in near for pos in last):
        return "fully"
    # frequent near the end: the thread has made little progress lately (a long thread with two
    # repeats far apart has moved on in between)
    recent = {x.position for x in items[-WINDOW:]}
    lately = recent.intersection(p.repeat.position for p in repeats)
    frequent = len(near & recent) >= 2 or 2 * len(lately) >= len(recent) or len(repeats) >= FREQUENT * len(items)
    if last[-1] in near and frequent:
        return "mostly"
    return "partial"


def user_repeats(ctx: Context, turns: list[int]) -> list[int]:
    """User turns that ask again what one of the previous few user turns asked."""
    out = []
    asked = [ctx.user_tokens(t) for t in turns]
    for n, (t, mine) in enumerate(zip(turns, asked, strict=True)):
        earlier = turns[max(0, n - USER_WINDOW) : n]
        if not earlier:
            continue
        if mine:
            hit = process.extractOne(
                mine,
                asked[max(0, n - USER_WINDOW) : n],
                scorer=Indel.normalized_similarity,
                score_cutoff=SAME_QUESTION - CUTOFF_SLACK,
            )
            if hit is not None:
                out.append(t)
        elif any(ctx.same_question(u, t) for u in earlier):
            out.append(t)
    return out


class Repetition(MetricBase):
    """Thread-scope repetition between assistant replies, sentence by sentence (V5−)."""

    name = "repetition"
    version = "6"
    tier = "deterministic"
    scopes = ("thread",)
    default_threshold = DEFAULT_THRESHOLD
    description = "Assistant replies that repeat what earlier replies said, in any script (V5−)."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        all_replies = replies(thread)
        if not all_replies:
            return [not_applicable(self.spec, "no assistant replies with text")]
        ctx = Context.of(thread)
        found = analyse(all_replies, ctx)
        items = found.compared
        # short replies said again are repeats, but short replies alone are too little to call a
        # thread free of repetition (the judge's gate reads "none" as nothing to find)
        if len(items) < 2 or (found.wordy < 2 and not found.repeats):
            return [not_applicable(self.spec, f"fewer than two replies with {MIN_SENTENCE_TOKENS}+ content words")]
        label = verdict(found.repeats, items)
        evidence = {
            "repeated_messages": sorted(p.repeat.position for p in found.repeats),
            "repeated_turns": sorted({p.repeat.turn for p in found.repeats}),
            "pairs": [p.as_evidence() for p in found.repeats],
            "neutral_pairs": [p.as_evidence() for p in found.neutral],
            "max_similarity": found.max_similarity,
            "max_sentence_similarity": found.max_sentence_similarity,
            "repeated_segments": found.segments,
            "user_repeats": user_repeats(ctx, ctx.asked),
            "language_covered": found.language_covered,
            "replies_compared": len(items),
        }
        return [
            ok(
                self.spec,
                WEIGHTS[label],
                label=label,
                reason=_reason(label, found.repeats, len(items), found.max_similarity),
                evidence=evidence,
            )
        ]


def _reason(label: str, repeats: list[Pair], n: int, top: float) -> str:
    if label == "none":
        return f"no reply repeats an earlier one (max similarity {top:.2f} over {n} replies)"
    near = sum(p.kind == "near_verbatim" for p in repeats)
    tail = {
        "minor": "only single sentences come back",
        "partial": "the last reply is new",
        "mostly": "the last reply is a near-verbatim repeat",
        "fully": "the last two replies are near-verbatim repeats",
    }[label]
    return f"{len(repeats)} of {n} replies repeat an earlier one ({near} near-verbatim); {tail}"
