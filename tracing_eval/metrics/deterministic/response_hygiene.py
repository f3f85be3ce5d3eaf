"""D7 `response_hygiene`: per-turn checks on the reply the user saw.

Checks: `empty` (the turn has assistant messages but no text, unless it ends in a successful
hand-off tool call such as `transfer_to_human_agents`), `truncated` (finish_reason=length,
or the reply stops mid-sentence: a dangling comma, conjunction or article, or an unclosed code
fence; a reply that ends in a URL or a path such as `https://example.com/` is finished),
`placeholder` (leaked template text such as `{{name}}`, `[INSERT ...]`, `[Customer Name]`,
`<order_id>`, `%s`, `${x}` outside code, a chat template's special token such as `<|im_end|>` or
`[/INST]`, or a whole reply of `None` / `undefined` / `null`; template syntax inside a code block
or inline code is content, as in an answer about Jinja), and `language`
(the reply is in another script, or another Latin-script language, than the user's message). Every
turn gets a result: turns without an assistant message are `not_applicable`. The thread score is the
share of clean turns.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.languages import latin_language
from tracing_eval.metrics.deterministic.lexicons import LANGUAGE_WORDS
from tracing_eval.metrics.deterministic.similarity import words
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread, Turn
from tracing_eval.text import Folded
from tracing_eval.text import script_of as text_script_of

DEFAULT_THRESHOLD = 0.7
CHECKS = ("empty", "truncated", "placeholder", "language")

#: the function words of the Latin-script languages other than English: a reply with none of them
#: can be guessed English or nothing, never another language
_NOT_ENGLISH = frozenset().union(*(v for k, v in LANGUAGE_WORDS.items() if k != "en"))

MIN_SCRIPT_LETTERS = 12
SCRIPT_SHARE = 0.6

#: template fields people leave in replies, spelled "[Customer Name]", "[CUSTOMER NAME]" or
#: "<customer_name>"; lower-case "[name]" or "<name>" is left alone (command syntax in an answer)
_FIELDS = (
    "name", "first name", "last name", "full name", "customer name", "your name", "user name", "agent name",
    "company name", "product name", "recipient name", "email", "email address", "phone", "phone number",
    "address", "date", "time", "amount", "price", "order number", "order id", "tracking number",
    "account number", "link", "url", "company", "product", "city",
)  # fmt: skip
_FIELD = "|".join(
    sorted(
        spelling
        for f in _FIELDS
        for spelling in {f.title(), f.upper(), f.upper().replace(" ", "_"), f.replace(" ", "_") if " " in f else ""}
        if spelling
    )
)
PLACEHOLDER = re.compile(
    r"\{\{.{0,200}?\}\}|\{\{|\}\}|\$\{[A-Za-z_][\w.]*\}|\{%.{0,200}?%\}|\[object Object\]"
    # a format-string field left in prose: "Dear {first_name}," (not LaTeX: \\frac{a}{b}, x_{i}, e^{x})
    r"|(?<![\w\\^}$])\{[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\}(?!\})"
    r"|<INSERT\b|\[(?:INSERT|PLACEHOLDER|TODO|TBD)\b"
    # a template field in brackets: "[Customer Name]", "$[AMOUNT]", "<tracking_number>", "<EMAIL>"
    # (not the text of a Markdown link: "[Link](https://...)", "[Address][1]")
    rf"|\[(?:{_FIELD})\](?![(\[])|<(?:{_FIELD})>"
    # a printf field left in prose: "order %s", "Hello %(name)s"
    r"|%\([A-Za-z_]\w*\)[sd]|(?<![\w%])%[sd](?![\w%])"
    r"|\b(?i:hi|hello|dear|hey|thanks|thank you),?\s+(?:undefined|null|None|NaN)\b"
    # a chat template's special token left in the text: "<|im_end|>", "<|eot_id|>", "[/INST]", "<end_of_turn>"
    r"|<\|[A-Za-z_][\w.-]{0,40}\|>|\[/?INST\]|</?(?:start|end)_of_turn>",
)
#: every PLACEHOLDER match holds one of these: a cheap gate before stripping code and searching
_MAYBE_PLACEHOLDER = ("{", "}", "$", "[", "<", "%", "undefined", "null", "None", "NaN")
WHOLE_PLACEHOLDER = Folded(r"^\s*(?:none|null|undefined|nan|nil|\[\]|\{\})\s*$")
#: words a finished English sentence almost never ends on without a mark after them (prepositions
#: and pronouns can: "what are you looking for"; "of" hardly: "the nba is one of")
DANGLING_WORDS = frozenset("a an the and or but nor because than my your our their its whose of".split())
#: tool names that hand the conversation over; a turn that ends in one needs no reply text
HANDOFF = re.compile(r"transfer|hand_?off|escalat|human|agent_?handover", re.IGNORECASE)
_TAIL_WORD = re.compile(r"([^\W\d_]+)\W*$")
#: the reply ends in a URL or a path: its trailing "/" or "-" is not a dangling mark
_LINK_TAIL = Folded(r"(?:^|\s|[(<\[])(?:[a-z][\w+.-]*://|www\.|~?/|\.{1,2}/|[\w.-]+/)\S*$")
#: fenced code (closed or running to the end) and inline code spans
_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]+`", re.DOTALL)
#: a reply (stripped of trailing white space) that ends in one of these is left dangling
_DANGLING_PUNCT = frozenset(",;:-\u2013\u2014([{/&+")
#: the tail word is read from this many last characters (a longer word is no dangling word either)
_TAIL_CHARS = 40


def truncated(text: str, finish_reason: str | None) -> str | None:
    """Why the reply looks cut off, or None."""
    if finish_reason and finish_reason.lower() in ("length", "max_tokens", "max_output_tokens"):
        return "finish_reason=length"
    stripped = text.rstrip()
    if not stripped:
        return None
    if stripped.count("```") % 2 == 1:
        return "unclosed code block"
    if (
        stripped[-1] in _DANGLING_PUNCT
        and not stripped.endswith((":-)", ";-)", ":)"))
        and not _LINK_TAIL.search(stripped)
    ):
        return "ends with a dangling punctuation mark"
    last = stripped[-1]
    if last.isalpha():
        m = _TAIL_WORD.search(stripped, max(0, len(stripped) - _TAIL_CHARS))
        if m and m.group(1).lower() in DANGLING_WORDS and len(stripped.split()) >= 6:
            return f"ends mid-sentence on {m.group(1)!r}"
    return None


@lru_cache(maxsize=256)  # the messages of a thread or two: the checks of one thread share them
def script_of(text: str) -> str | None:
    """The dominant Unicode script of the letters in `text`, when there are enough of them."""
    return text_script_of(text, min_letters=MIN_SCRIPT_LETTERS, share=SCRIPT_SHARE)


def language_mismatch(user: str, reply: str) -> str | None:
    """A description of the mismatch between the user's language and the reply's, or None."""
    us, rs = script_of(user), script_of(reply)
    if us and rs and us != rs:
        return f"user writes {us.title()} script, reply is {rs.title()}"
    if us == rs == "LATIN":
        ul = latin_language(user)
        if ul is None or (ul == "en" and _NOT_ENGLISH.isdisjoint(words(reply))):
            return None
        rl = latin_language(reply)
        if rl and rl != ul:
            return f"user writes {ul}, reply is {rl}"
    return None


def ends_in_handoff(turn: Turn) -> bool:
    """The turn's last tool call hands the user over (to a human) and did not fail."""
    calls = turn.tool_calls
    return bool(calls) and not calls[-1].failed and bool(HANDOFF.search(calls[-1].name))


def check_turn(turn: Turn) -> dict[str, str]:
    """Failing checks of one turn's reply, each with a short explanation."""
    reply = turn.assistant_text
    failing: dict[str, str] = {}
    if not reply.strip():
        if ends_in_handoff(turn):
            return failing
        failing["empty"] = "the turn has no reply text" if turn.assistant_messages else "no reply"
        if turn.finish_reason and turn.finish_reason.lower() in ("length", "max_tokens", "max_output_tokens"):
            failing["truncated"] = "finish_reason=length"
        return failing
    why = truncated(reply, turn.finish_reason)
    if why:
        failing["truncated"] = why
    if WHOLE_PLACEHOLDER.match(reply):
        failing["placeholder"] = f"the whole reply is {reply.strip()!r}"
    elif any(piece in reply for piece in _MAYBE_PLACEHOLDER):
        m = PLACEHOLDER.search(_CODE.sub(" ", reply))
        if m:
            failing["placeholder"] = f"leaked template text {m.group(0)[:40]!r}"
    mismatch = language_mismatch(turn.user_text, reply)
    if mismatch:
        failing["language"] = mismatch
    return failing


class ResponseHygiene(MetricBase):
    """Binary per-turn hygiene of the reply; the thread score is the share of clean turns."""

    name = "response_hygiene"
    version = "8"
    tier = "deterministic"
    scopes = ("turn", "thread")
    default_threshold = DEFAULT_THRESHOLD
    description = "Empty, truncated, placeholder-leaking or wrong-language replies."

    def evaluate(self, thread: Thread) -> list[MetricResult]:
        results: list[MetricResult] = []
        checked = 0
        bad_turns: dict[str, list[int]] = {c: [] for c in CHECKS}
        for turn in thread.turns:
            failing = check_turn(turn) if turn.assistant_messages else None
            results.append(self._turn_result(turn, failing))
            if failing is None:
                continue
            checked += 1
            for check in failing:
                bad_turns[check].append(turn.index)
        if checked == 0:
            results.append(not_applicable(self.spec, "no assistant replies"))
            return results
        flagged = sorted({t for turns in bad_turns.values() for t in turns})
        clean = checked - len(flagged)
        results.append(
            ok(
                self.spec,
                clean / checked,
                label="clean" if not flagged else "issues",
                reason=f"{clean} of {checked} replies are clean"
                + ("" if not flagged else "; " + ", ".join(f"{c}: {len(t)}" for c, t in bad_turns.items() if t)),
                evidence={
                    "clean_share": round(clean / checked, 4),
                    "turns_checked": checked,
                    "failing_turns": {c: t for c, t in bad_turns.items() if t},
                },
            )
        )
        return results

    def evaluate_from(self, thread: Thread, first: int) -> list[MetricResult]:
        """Each turn is checked on its own: only the turns from `first` on."""
        return [
            self._turn_result(turn, check_turn(turn) if turn.assistant_messages else None)
            for turn in thread.turns
            if turn.index >= first
        ]

    def _turn_result(self, turn: Turn, failing: dict[str, str] | None) -> MetricResult:
        """The turn's result from its failing checks (None: the turn has no assistant message)."""
        if failing is None:
            return not_applicable(self.spec, "no assistant message in this turn", turn_index=turn.index)
        return ok(
            self.spec,
            0.0 if failing else 1.0,
            turn_index=turn.index,
            label=next(iter(failing)) if failing else "clean",
            reason="; ".join(failing.values()) if failing else "reply passes every check",
            evidence={"failing": sorted(failing), "details": failing},
        )
