"""D7 `response_hygiene`: per-turn checks on the reply the user saw.

Checks: `empty` (the turn has assistant messages but no text, or only markup such as `---`, `**`
or an empty code block, unless it ends in a successful hand-off tool call such as
`transfer_to_human_agents`), `truncated` (finish_reason=length, or the reply stops mid-sentence: a
dangling comma, conjunction, article, "if" or "as", an unclosed code fence, a numbered list that
stops at the next item's number, or a table row cut short; a reply that ends in a URL or a path such
as `https://example.com/`, a frowning emoticon or a horizontal rule is finished), `placeholder`
(leaked template text such as `{{name}}`, `[INSERT ...]`, `[Customer Name]`, `<order_id>`,
`<<name>>`, `{0}`, `%s`, `${x}` outside code, "Hi [name]", "$NaN", a chat template's special token
such as `<|im_end|>` or `[/INST]`, or a whole reply of `None` / `undefined` / `null`; template
syntax inside a code block or inline code is content, as in an answer about Jinja, and so are
bracketed fields in a draft the user asked for, such as "[Your Name]" in an email), and `language`
(the reply is in another script, or another Latin-script language, than the user's message, unless
the user asks for a translation or names the reply's language). Every turn gets a result: turns
without an assistant message are `not_applicable`. The thread score is the share of clean turns.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tracing_eval.metrics.base import MetricBase
from tracing_eval.metrics.deterministic.languages import GUESS_MIN_HITS, latin_language
from tracing_eval.metrics.deterministic.lexicons import LANGUAGE_WORDS
from tracing_eval.metrics.deterministic.similarity import words
from tracing_eval.metrics.results import not_applicable, ok
from tracing_eval.model import MetricResult, Thread, Turn
from tracing_eval.text import Folded, holds_any
from tracing_eval.text import script_of as text_script_of

DEFAULT_THRESHOLD = 0.7
CHECKS = ("empty", "truncated", "placeholder", "language")

#: the function words of the Latin-script languages other than English: a reply with none of them
#: can be guessed English or nothing, never another language
_NOT_ENGLISH: frozenset[str] = frozenset().union(*(v for k, v in LANGUAGE_WORDS.items() if k != "en"))

#: names of a language (by code) or of the languages of a script, in the covered languages; a user
#: who names the reply's language, or asks for a translation, wants that language
LANGUAGE_NAMES = {
    "en": ("english", "inglés", "ingles", "anglais", "englisch", "inglese", "inglês"),
    "es": ("spanish", "español", "espanol", "espagnol", "spanisch", "spagnolo", "espanhol", "castellano"),
    "fr": ("french", "français", "francais", "francés", "frances", "französisch", "francese", "francês"),
    "de": ("german", "deutsch", "alemán", "aleman", "allemand", "tedesco", "alemão"),
    "pt": ("portuguese", "portugués", "portugais", "portugiesisch", "portoghese", "português"),
    "it": ("italian", "italiano", "italien", "italienisch"),
    "CYRILLIC": ("russian", "ukrainian", "bulgarian", "serbian", "russe", "ruso", "russisch", "russo"),
    "CJK": ("chinese", "japanese", "mandarin", "cantonese", "chinois", "japonais", "chino", "japonés"),
    "HANGUL": ("korean", "coréen", "coreano", "koreanisch"),
    "ARABIC": ("arabic", "persian", "farsi", "urdu", "arabe", "árabe", "arabisch"),
    "HEBREW": ("hebrew", "hébreu", "hebreo", "hebräisch"),
    "DEVANAGARI": ("hindi", "marathi", "nepali"),
    "GREEK": ("greek", "grec", "griego", "griechisch"),
    "THAI": ("thai", "tailandés", "thaï"),
}
_TRANSLATE = ("translat", "tradu", "übersetz", "uebersetz")
MIN_SCRIPT_LETTERS = 12
SCRIPT_SHARE = 0.6

#: template fields people leave in replies, spelled "[Customer Name]", "[Your name]", "[CUSTOMER NAME]"
#: or "<customer_name>"; lower-case "[name]" or "<name>" is left alone (command syntax in an answer)
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
        for spelling in {
            f.title(),
            f.capitalize(),
            f.upper(),
            f.upper().replace(" ", "_"),
            f.replace(" ", "_") if " " in f else "",
        }
        if spelling
    )
)
PLACEHOLDER = re.compile(
    r"\{\{.{0,200}?\}\}|\{\{|\}\}|\$\{[A-Za-z_][\w.]*\}|\{%.{0,200}?%\}|\[object Object\]|<<[A-Za-z_]\w*>>"
    # a format-string field left in prose: "Dear {first_name},", "Hi {0}" (not LaTeX: \\frac{a}{b}, x_{i}, e^{x})
    r"|(?<![\w\\^}$\])])\{(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|\d)\}(?!\})"
    # a bracketed field, left alone in a draft the user asked for (`field` group: see `leaked_placeholder`)
    r"|(?P<field><INSERT\b|\[(?:INSERT|PLACEHOLDER|TODO|TBD)\b|\[[Ii]nsert\s|\[(?:Your|YOUR)\s[^\]\n]{1,40}\](?![(\[])"
    # a template field in brackets: "[Customer Name]", "$[AMOUNT]", "<tracking_number>", "<EMAIL>", "[[name]]"
    # (not the text of a Markdown link: "[Link](https://...)", "[Address][1]")
    rf"|\[(?:{_FIELD})\](?![(\[])|<(?:{_FIELD})>|\[\[(?i:{_FIELD})\]\]"
    # any bracketed text a greeting names: "Hi [name],", "Dear [customer]"
    r"|\b(?i:hi|hello|dear|hey)\s+\[[^\]\n]{1,40}\](?![(\[]))"
    # a printf field left in prose: "order %s", "Hello %(name)s"
    r"|%\([A-Za-z_]\w*\)[sd]|(?<![\w%])%[sd](?![\w%])"
    r"|\b(?i:hi|hello|dear|hey|thanks|thank you),?\s+(?:undefined|null|None|NaN)\b"
    # a missing value rendered as an amount or a date: "$NaN", "€undefined", "NaN/NaN/NaN"
    r"|[$\u20ac\u00a3](?:NaN|undefined|null|None)\b|\bNaN/NaN\b"
    # a chat template's special token left in the text: "<|im_end|>", "<|eot_id|>", "[/INST]", "<end_of_turn>"
    r"|<\|[A-Za-z_][\w.-]{0,40}\|>|\[/?INST\]|</?(?:start|end)_of_turn>",
)
#: every PLACEHOLDER match holds one of these: a cheap gate before stripping code and searching
_MAYBE_PLACEHOLDER = ("{", "}", "$", "[", "<", "%", "undefined", "null", "None", "NaN")
#: the user asks for a text to send or fill in, or the reply offers one: its bracketed fields are for
#: the user ("Dear [Landlord's Name], ... [Your Name]")
_DRAFT_ASK = Folded(
    r"\b(?:write|draft|compose|prepare|create|generate)\b[^.?!\n]{0,60}\b(?:e-?mails?|letters?|messages?|notes?"
    r"|posts?|repl(?:y|ies)|invitations?|announcements?|speech|bio|texts?|cards?|memo|proposal|resume|cv)\b"
    r"|\btemplates?\b"
)
_DRAFT_SAYS = Folded(
    r"\b(?:drafts?|templates?|customi[sz]e|fill in|placeholders?|personali[sz]e)\b|\breplace (?:the )?(?:\[|bracket)"
    r"|^subject:",
    re.MULTILINE,
)
#: a reply of nothing but white space, zero-width characters and markup ("---", "**", an empty code
#: block, "<br>") shows the user nothing
BLANK = re.compile(r"(?:[\s\u200b-\u200d\u2060\ufeff*_`~#>|=-]|<br\s*/?>|&nbsp;)*")
WHOLE_PLACEHOLDER = Folded(r"^\s*(?:none|null|undefined|nan|nil|\[\]|\{\})\s*$")
#: words a finished English sentence almost never ends on without a mark after them (prepositions
#: and pronouns can: "what are you looking for"; "of", "if" and "as" hardly: "the nba is one of", "i wonder
#: if", "it has been described as"); a capital "A" ends "Plan A" and "the U S of A"
DANGLING_WORDS = frozenset("a an the and or but nor because than my your our their its whose of if as although".split())
#: tool names that hand the conversation over; a turn that ends in one needs no reply text
HANDOFF = re.compile(r"transfer|hand_?off|escalat|human|agent_?handover", re.IGNORECASE)
_TAIL_WORD = re.compile(r"\b([^\W\d_]+)\W*$")  # a whole word: not the "as" of "cb58as"
#: the reply ends in a URL or a path: its trailing "/" or "-" is not a dangling mark
_LINK_TAIL = Folded(r"(?:^|\s|[(<\[])(?:[a-z][\w+.-]*://|www\.|~?/|\.{1,2}/|[\w.-]+/)\S*$")
#: a line that opens or closes fenced code: three or more backticks or tildes at its start
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$", re.MULTILINE)
#: the last line of a reply that stops at the number of its next list item ("\n\n8." or "**3."), and
#: the item before it, whose number must be one less
_LIST_NUMBER = re.compile(r"\n[ \t>*_#]*(\d{1,3})[.)]?[ \t*_]*$")
#: a last line that is only a horizontal rule ("---", "- - -"): a finished reply may end in one
_RULE = re.compile(r"\n[ \t]*-(?:[ \t]*-){2,}$")
#: emoticons that end in a dangling mark
_EMOTICONS = (":-)", ";-)", ":)", ":(", ":-(", ";(", ":'(")
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
    if ("```" in stripped or "~~~" in stripped) and unclosed_fence(stripped):
        return "unclosed code block"
    last = stripped[-1]
    if (
        last in _DANGLING_PUNCT
        and not stripped.endswith(_EMOTICONS)
        and not _LINK_TAIL.search(stripped)
        and not (last == "-" and _RULE.search(stripped))
    ):
        return "ends with a dangling punctuation mark"
    if last.isalpha():
        m = _TAIL_WORD.search(stripped, max(0, len(stripped) - _TAIL_CHARS))
        if m and m.group(1).lower() in DANGLING_WORDS and len(stripped.split()) >= 6 and m.group(1) != "A":
            return f"ends mid-sentence on {m.group(1)!r}"
    elif last.isdigit() or last in ".)*_":
        m = _LIST_NUMBER.search(stripped, max(0, len(stripped) - 12))
        if m and m.group(1) != "1" and re.search(rf"(?m)^[ \t>*_#]*{int(m.group(1)) - 1}[.)]\s", stripped):
            return "ends at the number of the next list item"
    if stripped[stripped.rfind("\n") + 1 :].lstrip().startswith("|"):
        return cut_table_row(stripped)
    return None


def unclosed_fence(text: str) -> bool:
    """Does fenced code opened at the start of a line run to the end of `text`? A fence closes at a
    bare line of the same mark at least as long; a fence inside a line ("use ```python") is text."""
    opened = ""
    for m in _FENCE.finditer(text):
        mark, rest = m.group(1), m.group(2)
        if not opened:
            if not (mark[0] == "`" and "`" in rest):  # "```js```" on one line is no fence
                opened = mark
        elif mark[0] == opened[0] and len(mark) >= len(opened) and not rest.strip():
            opened = ""
    return bool(opened)


def cut_table_row(text: str) -> str | None:
    """Why the last line of `text`, a Markdown table row, looks cut short, or None: it has fewer cell
    borders than the row above it, or lacks the closing "|" the row above has."""
    lines = text.rsplit("\n", 2)
    if len(lines) < 2:
        return None
    above, last = lines[-2].strip(), lines[-1].strip()
    if not (above.startswith("|") and above.endswith("|")):
        return None
    if not last.endswith("|") or last.count("|") < above.count("|"):
        return "ends inside a table row"
    return None


@lru_cache(maxsize=256)  # the messages of a thread or two: the checks of one thread share them
def script_of(text: str) -> str | None:
    """The dominant Unicode script of the letters in `text`, when there are enough of them."""
    return text_script_of(text, min_letters=MIN_SCRIPT_LETTERS, share=SCRIPT_SHARE)


def language_mismatch(user: str, reply: str) -> str | None:
    """A description of the mismatch between the user's language and the reply's, or None (also when
    the user asks for a translation or names the reply's language: "answer in Spanish")."""
    us, rs = script_of(user), script_of(reply)
    if us and rs and us != rs:
        return None if asked_for(user, rs) else f"user writes {us.title()} script, reply is {rs.title()}"
    if us == rs == "LATIN":
        if english_or_nothing(reply) and english_or_nothing(user):
            return None  # `latin_language` can guess either only English or nothing: no mismatch
        ul = latin_language(user)
        if ul is None or (ul == "en" and english_or_nothing(reply)):
            return None
        rl = latin_language(reply)
        if rl and rl != ul and not asked_for(user, rl):
            return f"user writes {ul}, reply is {rl}"
    return None


def english_or_nothing(text: str) -> bool:
    """Can `latin_language(text)` only be "en" or None? It can when fewer than `GUESS_MIN_HITS` of the
    words it reads (`similarity.words`) are function words of another language."""
    ws = words(text)
    return _NOT_ENGLISH.isdisjoint(ws) or sum(w in _NOT_ENGLISH for w in ws) < GUESS_MIN_HITS


def asked_for(user: str, language: str) -> bool:
    """Does the user ask for a translation, or name `language` (a code or a script)?"""
    low = user.lower()
    return any(name in low for name in _TRANSLATE) or any(name in low for name in LANGUAGE_NAMES.get(language, ()))


def leaked_placeholder(user: str, reply: str) -> str | None:
    """The first template text left in `reply` outside code, or None; bracketed fields are left
    alone in a draft (the user asked for a text to fill in, or the reply offers one)."""
    text = _CODE.sub(" ", reply)
    drafting: bool | None = None
    for m in PLACEHOLDER.finditer(text):
        if m.group("field") is None:
            return m.group(0)
        if drafting is None:
            drafting = bool(_DRAFT_ASK.search(user) or _DRAFT_SAYS.search(reply))
        if not drafting:
            return m.group(0)
    return None


def ends_in_handoff(turn: Turn) -> bool:
    """The turn's last tool call hands the user over (to a human) and did not fail."""
    calls = turn.tool_calls
    return bool(calls) and not calls[-1].failed and bool(HANDOFF.search(calls[-1].name))


def check_turn(turn: Turn) -> dict[str, str]:
    """Failing checks of one turn's reply, each with a short explanation."""
    reply = turn.assistant_text
    failing: dict[str, str] = {}
    if BLANK.fullmatch(reply):
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
    elif holds_any(reply, _MAYBE_PLACEHOLDER):
        leak = leaked_placeholder(turn.user_text, reply)
        if leak:
            failing["placeholder"] = f"leaked template text {leak[:40]!r}"
    mismatch = language_mismatch(turn.user_text, reply)
    if mismatch:
        failing["language"] = mismatch
    return failing


class ResponseHygiene(MetricBase):
    """Binary per-turn hygiene of the reply; the thread score is the share of clean turns."""

    name = "response_hygiene"
    version = "9"
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
