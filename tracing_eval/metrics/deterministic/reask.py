"""D2 `reask`: the assistant asks again for a value the user already gave (binary gate).

Slot names and ways of asking are known in English, Spanish, French, German, Portuguese and
Italian (`LANGUAGES`); a thread whose replies are all in another language is `not_applicable`.

User messages fill a slot ledger (order numbers, emails, phones, ZIPs, dates, user, account and
reservation ids, names, party sizes); a bare value answering a direct ask fills the asked slot. An
assistant sentence that names a slot and carries a request marker is an ask; an ask for a slot in
the ledger (a party size: given this turn or the last) is a re-ask unless it confirms the known
value (written in the ask, or in its reply and the ask says "confirm"), offers values to choose
from, wants a different value of the kind (or the user said they have more than one: "I have two
orders"), restates a known slot next to a new one in a statement of need
("I'll need your user ID and the reservation ID"), or is justified (not found / invalid nearby,
a failed tool call in the same or previous turn, or the user just said the value was wrong).
A value that a tool or the assistant rejected, or that the user took back, leaves the ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic import slots
from tracing_eval.metrics.deterministic.languages import maybe_elsewhere, uncovered_language, words
from tracing_eval.metrics.deterministic.views import Located, located, replies
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread

#: languages whose slot names and ways of asking `slots` knows
LANGUAGES: tuple[str, ...] = ("en", "es", "fr", "de", "pt", "it")
DEFAULT_THRESHOLD = 0.7
ASK_TEXT_LIMIT = 200
PASSING_KINDS = ("first", "confirmation", "choice", "other_value", "restated", "justified")


@dataclass(frozen=True)
class Given:
    value: str
    position: int
    turn: int


@dataclass(frozen=True)
class Ask:
    slot: str
    turn: int
    position: int
    sentence: str
    #: first | reask | confirmation | choice | other_value | restated | justified
    kind: str
    given: Given | None = None

    def as_evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slot": self.slot, "asked_at": self.position, "turn": self.turn, "kind": self.kind}
        if self.given is not None:
            out.update(value=self.given.value, given_at=self.given.position, given_turn=self.given.turn)
        out["text"] = self.sentence[:ASK_TEXT_LIMIT]
        return out


#: messages whose reading is remembered (each cache): a thread still active is read again each time one
#: of its turns settles, so the messages of the conversations open at once are worth keeping
MESSAGES_REMEMBERED = 4096


@lru_cache(maxsize=MESSAGES_REMEMBERED)
def user_reading(text: str, elsewhere: bool) -> tuple[tuple[tuple[str, str], ...], bool, bool, tuple[str, ...]]:
    """What a user message says to the ledger: the (slot, value) pairs it gives (`slots.values_in`,
    none empty), whether it takes a value back (`slots.user_retracts`), whether it says a value it
    gave was wrong (`slots.user_corrects`) and the slots it has more than one value of (`slots.several`).
    Plain tuples of strings, which the garbage collector stops tracking, so a full cache adds little
    to a collection (a named tuple would stay tracked)."""
    return (
        tuple((slot, value) for slot, value in slots.values_in(text) if value),
        slots.user_retracts(text, elsewhere=elsewhere),
        slots.user_corrects(text, elsewhere=elsewhere),
        slots.several(text),
    )


@lru_cache(maxsize=MESSAGES_REMEMBERED)
def user_may_be_elsewhere(text: str) -> bool:
    """`languages.maybe_elsewhere` of a user message."""
    return maybe_elsewhere(text)


@lru_cache(maxsize=MESSAGES_REMEMBERED)
def reply_language(text: str) -> tuple[str | None, bool]:
    """Why the slot lexicons cannot read a reply (None: they can), and whether it may be in one of the
    covered languages other than English (`languages.maybe_elsewhere`)."""
    ws = words(text)
    return uncovered_language(text, LANGUAGES, words_=ws), maybe_elsewhere(text, words_=ws)


@lru_cache(maxsize=MESSAGES_REMEMBERED)
def sentence_asks(text: str, elsewhere: bool) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The sentences of an assistant message that ask for slots, each with those slots."""
    if not slots.could_name_a_slot(text, elsewhere=elsewhere) or not slots.could_ask(text):  # most replies
        return ()
    found = ((sentence, slots.asked_slots(sentence, elsewhere=elsewhere)) for sentence in slots.split_sentences(text))
    return tuple((sentence, tuple(named)) for sentence, named in found if named)


def _asks_in(item: Located, elsewhere: bool) -> bool:
    """Whether an item is an assistant reply with a sentence that asks for a slot."""
    return item.role == "assistant" and bool(item.text.strip()) and bool(sentence_asks(item.text, elsewhere))


def _fill(ledger: dict[str, Given], msg: Located, given: tuple[tuple[str, str], ...], asked_before: list[str]) -> None:
    """Record the values a user message gives; a bare value answers a single direct ask."""
    for slot, value in given:
        ledger[slot] = Given(value, msg.position, msg.turn)
    if len(asked_before) == 1 and asked_before[0] not in {slot for slot, _ in given}:
        bare = slots.bare_value(asked_before[0], msg.text)
        if bare:
            ledger[asked_before[0]] = Given(bare, msg.position, msg.turn)


def _forget(ledger: dict[str, Given], text: str, *, by_name: bool = True, elsewhere: bool = False) -> None:
    """Drop ledger entries a message rejects: it echoes their value, or (by_name) names their slot."""
    if not ledger:
        return
    named = set(slots.named_slots(text, elsewhere=elsewhere)) if by_name else set()
    for slot in list(ledger):
        if slot in named or slots.mentions_value(text, ledger[slot].value):
            del ledger[slot]


def _after_reply(ledger: dict[str, Given], item: Located, elsewhere: bool) -> None:
    """A rejection in a reply or tool result, or a failed call on a value, takes the value back."""
    if item.text and slots.not_found(item.text, elsewhere=elsewhere):
        _forget(ledger, item.text, elsewhere=elsewhere)
    for call in item.message.tool_calls:
        if call.failed:
            _forget(ledger, str(call.arguments), by_name=False)


def _about(text: str, slot: str, known: Given, elsewhere: bool) -> bool:
    """The text concerns this slot: it names the slot or carries the known value."""
    return slot in slots.named_slots(text, elsewhere=elsewhere) or slots.mentions_value(text, known.value)


def _justified(
    context: list[Located], ask_msg: Located, user_said_wrong: bool, elsewhere: bool, slot: str, known: Given
) -> bool:
    """A user correction, or a not-found / invalid / failed lookup nearby that concerns this slot."""
    if user_said_wrong or slots.not_found(ask_msg.text, elsewhere=elsewhere):
        return True
    for item in context:
        if (
            item.role in ("assistant", "tool")
            and slots.not_found(item.text, elsewhere=elsewhere)
            and _about(item.text, slot, known, elsewhere)
        ):
            return True
        if item.role == "assistant" and any(
            tc.failed and slots.mentions_value(str(tc.arguments), known.value) for tc in item.message.tool_calls
        ):
            return True
    return False


def _classify(
    slot: str,
    sentence: str,
    known: Given | None,
    justified: Callable[[str, Given], bool],
    with_new: bool,
    message: str,
    several: frozenset[str],
) -> str:
    """The kind of an ask for `slot`; `message` is the whole reply, `several` the slots the user said
    they have more than one value of."""
    if known is None:
        return "first"
    if slots.mentions_value(sentence, known.value) and slots.CONFIRM.search(sentence):
        return "confirmation"
    if slots.offered_values(slot, sentence):
        return "choice"
    if slot in several or slots.wants_other_value(slot, sentence):
        return "other_value"
    if with_new:
        return "restated"
    if justified(slot, known):
        return "justified"
    if slots.CONFIRM_WORD.search(sentence) and slots.mentions_value(message, known.value):
        return "confirmation"  # "I'll send it to ann@example.com. Can you confirm that email?"
    return "reask"


def find_asks(thread: Thread, *, elsewhere: bool | None = None) -> list[Ask]:
    """Walk the transcript once, keeping the ledger, and classify every ask.

    `elsewhere`: also use the Spanish, French, German, Portuguese and Italian patterns (default: when a
    user or assistant message may be in one of those languages).
    """
    items = located(thread)
    if elsewhere is None:  # the other languages' patterns cost time: use them only where they may be needed
        elsewhere = any(item.role in ("user", "assistant") and maybe_elsewhere(item.text) for item in items)
    return asks_in(items, elsewhere)


def asks_in(items: list[Located], elsewhere: bool) -> list[Ask]:
    """`find_asks` over a thread's `located` messages."""
    # the ledger matters only at an ask: what comes after the last one cannot change any result
    last = next((k for k in range(len(items) - 1, -1, -1) if _asks_in(items[k], elsewhere)), -1)
    if last < 0:
        return []
    ledger: dict[str, Given] = {}
    asks: list[Ask] = []
    asked_before: list[str] = []
    turn_start: dict[int, int] = {}
    for k, item in enumerate(items):
        turn_start.setdefault(item.turn, k)
    corrected_turns: set[int] = set()
    several: frozenset[str] = frozenset()
    for k, item in enumerate(items[: last + 1]):
        if item.role == "user" and item.text.strip():
            given, retracts, corrects, more = user_reading(item.text, elsewhere)
            if more:
                several = several.union(more)
            if retracts:
                _forget(ledger, item.text, elsewhere=elsewhere)
            _fill(ledger, item, given, asked_before)
            if corrects:
                corrected_turns.add(item.turn)
            asked_before = []
            continue
        if item.role == "tool":
            _after_reply(ledger, item, elsewhere)
            continue
        if item.role != "assistant":
            continue
        if not item.text.strip():
            _after_reply(ledger, item, elsewhere)
            continue
        # context: preceding messages of this turn and the whole previous turn
        start = turn_start.get(item.turn - 1, turn_start[item.turn])
        justified = partial(_justified, items[start:k], item, item.turn in corrected_turns, elsewhere)
        asked_here: list[str] = []
        for sentence, asked in sentence_asks(item.text, elsewhere):
            named = [s for s in asked if s not in asked_here]
            with_new = bool(named) and any(s not in ledger for s in named) and not slots.is_request(sentence)
            for slot in named:
                asked_here.append(slot)
                known = ledger.get(slot)
                fresh = slots.SLOT_BY_NAME[slot].fresh_turns
                if known is not None and fresh is not None and item.turn - known.turn > fresh:
                    known = None  # given for an earlier booking
                kind = _classify(slot, sentence, known, justified, with_new, item.text, several)
                asks.append(Ask(slot, item.turn, item.position, sentence, kind, known))
        asked_before = asked_here
        _after_reply(ledger, item, elsewhere)
    return asks


class Reask(MetricBase):
    """Binary: did the assistant ask again for a value the user had already given?"""

    name = "reask"
    version = "7"
    tier = "deterministic"
    scopes = ("turn", "thread")
    default_threshold = DEFAULT_THRESHOLD
    description = "The assistant asks again for a value (order number, email, id, ...) the user already gave."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        reply_turns = {t.index for t in thread.turns if t.assistant_text.strip()}
        if not reply_turns:
            return [not_applicable(self.spec, "no assistant replies with text")]
        items = located(thread)
        texts = replies(thread, items)
        unread: dict[int, str] = {}
        elsewhere = False
        for x in texts:
            why, maybe = reply_language(x.text)
            if why is not None:
                unread[x.position] = why
            elsewhere = elsewhere or maybe
        if texts and len(unread) == len(texts):
            return [
                not_applicable(
                    self.spec,
                    f"replies in a language the slot lexicons do not cover ({'; '.join(sorted(set(unread.values())))}"
                    f"; covered: {', '.join(LANGUAGES)})",
                )
            ]
        if not elsewhere:
            elsewhere = any(user_may_be_elsewhere(t.user_text) for t in thread.turns)
        asks = asks_in(items, elsewhere)
        results: list[MetricResult] = []
        for turn in sorted({a.turn for a in asks}):
            here = [a for a in asks if a.turn == turn]
            bad = [a for a in here if a.kind == "reask"]
            results.append(
                ok(
                    self.spec,
                    0.0 if bad else 1.0,
                    turn_index=turn,
                    label="reask" if bad else "none",
                    reason=_turn_reason(here, bad),
                    evidence={
                        "asks": [a.as_evidence() for a in here],
                        "reasked_messages": sorted({a.position for a in bad}),
                    },
                )
            )
        reasks = [a for a in asks if a.kind == "reask"]
        reask_turns = {a.turn for a in reasks}
        evidence = {
            "reasked_messages": sorted({a.position for a in reasks}),
            "reasks": [
                {
                    "slot": a.slot,
                    "value": a.given.value,
                    "given_at": a.given.position,
                    "asked_at": a.position,
                    "turn": a.turn,
                }
                for a in reasks
                if a.given is not None
            ],
            "reask_rate": round(len(reask_turns) / len(reply_turns), 4),
            "asks": len(asks),
            "passed_asks": {k: sum(a.kind == k for a in asks) for k in PASSING_KINDS},
            "unread_messages": sorted(unread),
        }
        results.append(
            ok(
                self.spec,
                0.0 if reasks else 1.0,
                label="reask" if reasks else "none",
                reason=_thread_reason(asks, reasks),
                evidence=evidence,
            )
        )
        return results


def _turn_reason(here: list[Ask], bad: list[Ask]) -> str:
    if not bad:
        return "asked for " + ", ".join(f"{a.slot} ({a.kind.replace('_', ' ')})" for a in here)
    return "; ".join(
        f"asked for {a.slot} again although the user gave it at message {a.given.position}" for a in bad if a.given
    )


def _thread_reason(asks: list[Ask], reasks: list[Ask]) -> str:
    if not asks:
        return "the assistant never asked for a value"
    if not reasks:
        return f"{len(asks)} asks, none for a value the user had already given"
    slots_ = ", ".join(sorted({a.slot for a in reasks}))
    return f"{len(reasks)} re-ask(s) of values the user already gave ({slots_})"
