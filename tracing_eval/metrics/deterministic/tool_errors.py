"""D4 `tool_errors`: failed tool calls, whether the agent recovered, and errors masked as success.

Per turn with tool calls and per thread: score = 1 - unrecovered / calls, forced to 0 when an
unrecovered error is masked (the reply claims success with no error or apology phrase), and capped
by identical-call loops (3+ identical calls in a turn → 0.5, 6+ → 0). An error is recovered by a
later success of the same tool on the same target: in the same turn for the turn result, anywhere
later in the thread for the thread result. Recovery is keyed on the tool and its arguments: a retry
with the same arguments recovers, and so does one with corrected arguments (a mistyped id, a total
the user corrected, a value looked up after the failure). A success on another target that the
conversation already named before the failure does not: when `cancel(AAA111)` fails and
`cancel(BBB222)` succeeds, AAA111 is still not cancelled.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.views import Located, located
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Scope, Thread, ToolCall, Turn
from tracing_eval.text import SPACELESS, SPACELESS_CHAR, Folded

DEFAULT_THRESHOLD = 0.7
LOOP_HALF = 3
LOOP_ZERO = 6
ERROR_TEXT_LIMIT = 300

_DONE = (
    r"(?:updated|cancell?ed|booked|changed|modified|processed|sent|created|added|removed|issued|refunded|scheduled"
    r"|submitted|saved|applied|upgraded|reset|transferred|placed|confirmed)"
)
SUCCESS = Folded(
    r"\bsuccessful(?:ly)?\b|\b(?:all )?done\b|\bcompleted?\b"
    rf"|\bi(?:'ve| have)\s+(?:(?!not\b|never\b)\w+\s+)?{_DONE}\b|\b(?:i(?:'ve| have) gone|i went) ahead and {_DONE}\b"
    rf"|(?:\b(?:has|have)|'s) been\s+(?:(?!not\b|never\b)\w+\s+)?(?:{_DONE}|completed)\b"
    r"|\b(?:is|are) (?:now )?(?:both )?(?:confirmed|booked|cancell?ed|all set|saved|reserved)\b"
    r"|\byou(?:'re| are) (?:now )?(?:all )?(?:set|booked|confirmed|registered|enrolled|subscribed)\b|^\W*all set\b"
    r"|\bi\s+(?:just\s+|already\s+|successfully\s+|also\s+)?(?:updated|cancell?ed|booked|changed|modified|processed"
    r"|created|added|removed|issued|refunded|scheduled|submitted|saved|applied|upgraded|transferred|placed)\b"
    r"|\b(?:went|has gone|have gone) through\b|\b(?:is|are) now (?:updated|changed|active|live|in place)\b"
    r"|\b(?:is|are) (?:on (?:its|their) way|being processed)\b|(?:\b(?:is|are|been|all)|'s) taken care of\b"
    r"|\byou(?:'ll| will) (?:receive|get|see) (?:your|a|the) (?:full )?(?:refund|confirmation)\b"
    rf"|^\W*(?:(?!not\b|never\b|nothing\b)[a-z]+ )?{_DONE}[ \t]*(?:[.!✅]|$)"
)
#: before a claim in its sentence: a condition, a plan or a negation ("once it's done", "I'll get it
#: done", "nothing has been cancelled"), so no claim of success
NOT_A_CLAIM = Folded(
    r"\b(?:once|when|whenever|until|till|if|unless|will|would|should|never|nothing|none)\b|'ll\b|\bnot\b(?! a problem)"
    r"|\bas soon as\b|\bno (?:changes?|\w+ (?:has|have|was|were))\b"
)
ERROR_OR_APOLOGY = Folded(
    r"\bsorry\b|\bapologi[sz]e|\bunfortunately\b|\berror\b|\bfail(?:ed|ure|s)?\b|\bunable\b"
    r"|(?<!\bno )(?<!\bnot an )\bissue\b|(?<!\bno )(?<!\bnot a )\bproblem\b"
    r"|\bcould(?:n'?t| not)\b|\bcan(?:'?t|not)\b|\bdid(?:n'?t| not)\b|\bwas(?:n'?t| not)\b|\bdoes(?:n'?t| not)\b"
    r"|\bis(?:n'?t| not)\b|\bnot (?:possible|able|available|allowed|eligible)\b|\bhowever\b|\bdeclined\b|\bdenied\b"
    r"|\binvalid\b|\bcrash(?:ed|es)?\b|\bwent wrong\b|\bno longer\b|\b(?:still|remains?) (?:active|open|pending)\b"
    r"|\bpast the (?:\w+ )?(?:window|deadline)\b"
)


@dataclass(frozen=True)
class Call:
    turn: int
    position: int
    call: ToolCall
    key: tuple[str, str]  # the name and the canonical arguments: equal calls have equal keys

    def as_evidence(self) -> dict[str, Any]:
        return {
            "name": self.call.name,
            "arguments": json_safe(self.call.arguments),
            "error": (self.call.error or "")[:ERROR_TEXT_LIMIT],
            "position": self.position,
            "turn": self.turn,
            "call_id": self.call.id,
        }


def canonical_args(arguments: Any) -> str:
    """Arguments as canonical JSON (sorted keys), so equal calls compare equal."""
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(arguments)


def json_safe(value: Any) -> Any:
    """The value itself when it serialises to JSON, else its repr (evidence is stored as JSON)."""
    try:
        orjson.dumps(value)
    except TypeError:
        return repr(value)
    return value


def calls_of(items: list[Located]) -> list[Call]:
    """Every tool call in order, with the turn and position of the assistant message that made it
    (`items`: the thread's messages, `views.located`)."""
    return [
        Call(item.turn, item.position, tc, (tc.name, canonical_args(tc.arguments)))
        for item in items
        if item.role == "assistant"
        for tc in item.message.tool_calls
    ]


#: an argument value that identifies a thing: a code with a digit, or an upper-case code
_IDENTIFIER = re.compile(r"^(?=[^\s]*\d)[\w.@:/#-]{3,}$|^[A-Z0-9]{5,}$")


def _leaves(arguments: Any) -> dict[str, Any]:
    """Top-level argument values by key (a non-mapping is one value)."""
    return dict(arguments) if isinstance(arguments, dict) else {"": arguments}


def named(text: str, value: str) -> bool:
    """`value` occurs in `text` as written (case aside: Unicode case folding), not inside a longer
    token (a run of letters, digits, `_` and `-`): `884122` is not named by "8841-22", so a retry that
    fixed its format is a correction, not another target. Scripts written without spaces (Chinese,
    Japanese, Thai, ...) have no tokens to be inside: "飞往城市5" is named in "请搜索飞往城市5的航班"."""
    if not value:
        return False
    low, wanted = _fold(text), _fold(value)
    inside = _TOKEN_CHARS.__contains__ if text.isascii() else _token_char
    at = low.find(wanted)
    while at >= 0:
        end = at + len(wanted)
        if (at == 0 or not inside(low[at - 1])) and (end == len(low) or not inside(low[end])):
            return True
        at = low.find(wanted, at + 1)
    return False


def _fold(text: str) -> str:
    """`text` with case folded (`str.lower` where that is the same: ASCII)."""
    return text.lower() if text.isascii() else text.casefold()


def _token_char(c: str) -> bool:
    """A character of a token: a letter or digit (`\\w`) of a script written with spaces, `_`, `-`."""
    return c in _TOKEN_CHARS or (c >= "\x80" and c.isalnum() and not SPACELESS_CHAR.match(c))


#: the ASCII characters of tokens: a value next to one of them is part of a longer token
_TOKEN_CHARS = frozenset(string.ascii_lowercase + string.ascii_uppercase + string.digits + "_-")
#: what `Mentions` indexes in case-folded text: the tokens, and each character of a spaceless script
_PARTS = re.compile(rf"(?:[^\W{SPACELESS}]|-)+|[{SPACELESS}]")
_ASCII_PARTS = re.compile(r"[a-z0-9_-]+")  # the same on lower-cased ASCII text, and faster


def _parts_of(text: str) -> list[str]:
    """The parts of `text` that `Mentions` indexes (`_PARTS` of the case-folded text)."""
    return (_ASCII_PARTS if text.isascii() else _PARTS).findall(_fold(text))


#: `Mentions` indexes the messages of a thread with more than this many user and tool messages
INDEX_FROM = 32


class Mentions:
    """Where the user and tool messages of a thread first name a value (`named`), each value looked up
    once. A long thread's messages are indexed by their parts (`_PARTS`: case-folded tokens, and the
    characters of spaceless scripts) on first use: a message can name a value only if it holds every
    part of the value, so only those messages are read. A thread with many failed calls thus reads its
    text about once, not once per failure. A value is named within one message: one with a line
    break is not found across two."""

    def __init__(self, context: list[tuple[int, str]]) -> None:
        self._context = context
        self._first: dict[str, float] = {}
        self._parts: dict[str, set[int]] | None = None

    def before(self, value: str, position: int) -> bool:
        """`value` is named in a message at a position before `position`."""
        first = self._first.get(value)
        if first is None:
            first = self._first[value] = self._first_position(value)
        return first < position

    def _first_position(self, value: str) -> float:
        wanted = set(_parts_of(value)) if len(self._context) > INDEX_FROM else set()
        if wanted:
            postings = [self._index().get(t, set()) for t in wanted]
            rarest = min(postings, key=len)  # only its messages are tested against the others
            read: Iterable[int] = sorted(k for k in rarest if all(k in p for p in postings))
        else:
            read = range(len(self._context))
        return next((self._context[k][0] for k in read if named(self._context[k][1], value)), math.inf)

    def _index(self) -> dict[str, set[int]]:
        if self._parts is None:
            self._parts = {}
            for k, (_, text) in enumerate(self._context):
                for part in _parts_of(text):
                    self._parts.setdefault(part, set()).add(k)
        return self._parts


def another_target(failed: Call, success: Call, mentions: Mentions) -> bool:
    """The success acts on a different target than the failure: for some argument both the failed
    value and the new one were named in the conversation (user or tool text) before the failure, and
    the calls share no identifier (a retry of `update(OBUT9V, payment=A)` as `update(OBUT9V,
    payment=B)` acts on the same reservation)."""
    a, b = _leaves(failed.call.arguments), _leaves(success.call.arguments)
    if any(a[k] == b.get(k) and isinstance(a[k], str) and _IDENTIFIER.match(a[k]) for k in a):
        return False
    for key in a.keys() | b.keys():
        old, new = a.get(key), b.get(key)
        if old == new or not isinstance(old, str | int) or not isinstance(new, str | int):
            continue
        if mentions.before(str(old), failed.position) and mentions.before(str(new), failed.position):
            return True
    return False


def unrecovered(calls: list[Call], mentions: Mentions) -> list[Call]:
    """Failed calls with no later success among `calls` (one turn's, or the thread's) of the same tool
    on the same target, in call order. One walk from the end keeps the later successes of each tool,
    one per distinct arguments, so a long thread is not read once per failure."""
    later: dict[str, dict[tuple[str, str], Call]] = {}
    out = []
    for c in reversed(calls):
        successes = later.setdefault(c.call.name, {})
        if not c.call.failed:
            successes.setdefault(c.key, c)
        elif not successes or (
            c.key not in successes and all(another_target(c, d, mentions) for d in successes.values())
        ):
            out.append(c)
    out.reverse()
    return out


def context_of(items: list[Located]) -> list[tuple[int, str]]:
    """(position, text) of every user message and tool result among `items`, in order."""
    return [(x.position, x.text) for x in items if x.role in ("user", "tool") and x.text]


def repeated_failures(calls: list[Call]) -> list[dict[str, Any]]:
    """The same (name, canonical args) failing on two or more consecutive attempts of that tool.

    Calls to other tools in between (a `think` step, a calculator) do not break the run.
    """
    by_tool: dict[str, list[Call]] = {}
    for c in calls:
        by_tool.setdefault(c.call.name, []).append(c)
    out: list[dict[str, Any]] = []
    for attempts in by_tool.values():
        k = 0
        while k < len(attempts):
            first = attempts[k]
            j = k + 1
            if first.call.failed:
                while j < len(attempts) and attempts[j].call.failed and attempts[j].key == first.key:
                    j += 1
            if j - k >= 2:
                out.append(
                    {
                        "name": first.call.name,
                        "arguments": json_safe(first.call.arguments),
                        "count": j - k,
                        "positions": [x.position for x in attempts[k:j]],
                    }
                )
            k = j
    out.sort(key=lambda r: r["positions"][0])
    return out


def loop_cap(calls: list[Call]) -> tuple[float, int]:
    """(score cap, largest identical-call count within one turn)."""
    counts = Counter((c.turn, c.key) for c in calls)
    most = max(counts.values(), default=0)
    if most >= LOOP_ZERO:
        return 0.0, most
    if most >= LOOP_HALF:
        return 0.5, most
    return 1.0, most


def masks_error(turn: Turn, turn_unrecovered: list[Call]) -> bool:
    """An unrecovered error in the turn, and a reply that claims success without an error/apology phrase."""
    if not turn_unrecovered:
        return False
    reply = turn.assistant_text
    return bool(reply and claims_success(reply) and not ERROR_OR_APOLOGY.search(reply))


def claims_success(reply: str) -> bool:
    """A success phrase (`SUCCESS`) that no condition, plan or negation before it in its sentence
    (`NOT_A_CLAIM`) turns into something else: "Done!", not "I'll let you know when it's done"."""
    for m in SUCCESS.finditer(reply):
        start = max(reply.rfind(mark, 0, m.start()) for mark in ".!?\n") + 1  # of the claim's sentence
        if not NOT_A_CLAIM.search(reply[start : m.start()]):
            return True
    return False


def _label(score: float, failed: int, masked: bool, repeated: bool, unrec: int, identical: int) -> str:
    if failed == 0 and identical < LOOP_HALF:
        return "none"
    if masked or score < 0.5:
        return "high"
    if unrec or repeated or score < 1.0:
        return "medium"
    return "low"


class ToolErrors(MetricBase):
    """Tool-call failures per turn and per thread; not applicable without tool calls."""

    name = "tool_errors"
    version = "10"
    tier = "deterministic"
    scopes = ("turn", "thread")
    default_threshold = DEFAULT_THRESHOLD
    description = "Failed tool calls, repeated failures, unrecovered errors and errors masked as success."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        items = located(thread)  # read once for the calls and their context
        calls = calls_of(items)
        if not calls:
            return [not_applicable(self.spec, "the thread has no tool calls")]
        mentions = Mentions(context_of(items))
        results = self._turn_results(thread, calls, mentions, 0)
        masked_turns = [r.turn_index for r in results if r.evidence["masked_error"] and r.turn_index is not None]
        thread_unrec = unrecovered(calls, mentions)
        results.append(self._result(calls, thread_unrec, bool(masked_turns), Scope.THREAD, None, masked_turns))
        return results

    def evaluate_from(self, thread: Thread, first: int) -> list[MetricResult]:
        """A turn's result reads its own calls: only the turns from `first` on."""
        items = located(thread)
        calls = calls_of(items)
        return self._turn_results(thread, calls, Mentions(context_of(items)), first) if calls else []

    def _turn_results(self, thread: Thread, calls: list[Call], mentions: Mentions, first: int) -> list[MetricResult]:
        """The result of every turn from `first` on that made tool calls."""
        by_turn: dict[int, list[Call]] = {}
        for c in calls:
            if c.turn >= first:
                by_turn.setdefault(c.turn, []).append(c)
        results: list[MetricResult] = []
        for turn in thread.turns:
            here = by_turn.get(turn.index)
            if not here:
                continue
            turn_unrec = unrecovered(here, mentions)
            results.append(self._result(here, turn_unrec, masks_error(turn, turn_unrec), Scope.TURN, turn.index))
        return results

    def _result(
        self,
        calls: list[Call],
        unrec: list[Call],
        masked: bool,
        scope: Scope,
        turn_index: int | None,
        masked_turns: list[int] | None = None,
    ) -> MetricResult:
        failed = [c for c in calls if c.call.failed]
        repeated = repeated_failures(calls)
        cap, identical = loop_cap(calls)
        score = 0.0 if masked else min(cap, 1.0 - len(unrec) / len(calls))
        label = _label(score, len(failed), masked, bool(repeated), len(unrec), identical)
        evidence: dict[str, Any] = {
            "tool_calls": len(calls),
            "errors": len(failed),
            "error_rate": round(len(failed) / len(calls), 4),
            "failed_calls": [c.as_evidence() for c in failed],
            "unrecovered": [c.position for c in unrec],
            "repeated_failure": repeated,
            "masked_error": masked,
            "max_identical_calls": identical,
        }
        if masked_turns is not None:
            evidence["masked_turns"] = masked_turns
        return ok(
            self.spec,
            score,
            turn_index=turn_index,
            label=label,
            reason=_reason(len(calls), len(failed), len(unrec), masked, repeated, identical),
            evidence=evidence,
        )


def _reason(t: int, failed: int, unrec: int, masked: bool, repeated: list[dict[str, Any]], identical: int) -> str:
    if failed == 0 and identical < LOOP_HALF:
        return f"{t} tool call(s), none failed"
    parts = [f"{failed} of {t} tool call(s) failed, {unrec} never recovered"]
    if repeated:
        parts.append(f"{len(repeated)} repeated failure(s) with the same arguments")
    if identical >= LOOP_HALF:
        parts.append(f"the same call was made {identical} times in one turn")
    if masked:
        parts.append("the reply claims success despite the error")
    return "; ".join(parts)
