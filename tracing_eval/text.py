"""Small text helpers shared by conventions and deterministic metrics."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterator
from typing import Any

import orjson

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
_ASCII_WORD = re.compile(r"[a-z0-9]+")  # the same on lower-cased ASCII text, and faster
_APOSTROPHE = re.compile(r"(?<=[^\W_])['\u2019](?=[^\W_])")
#: Sentence ends: Latin-style punctuation before a space, full-width CJK/Devanagari/Arabic ends, line breaks.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；｡।؟])\s*|\n+")


#: the breaks of `split_sentences`, found from the mark before a break (a set of first characters
#: lets `re` skip ahead; a look-behind at every position does not)
_BREAK = re.compile(r"[.?!]\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences that end at `.`, `?` or `!` before white space, or at a line break, stripped, empty
    ones left out: the same as splitting at `(?<=[.?!])\\s+|\\n+` (an email or a decimal keeps its dot)."""
    out: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        at = m.start()
        end = at if text[at] == "\n" else at + 1  # a mark stays with its sentence
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = m.end()
    piece = text[start:].strip()
    if piece:
        out.append(piece)
    return out


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
        return _ASCII_WORD.findall(folded)
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
_PIECE = re.compile(
    rf"[^\W_{SPACELESS}]+|[{SPACELESS}]+|(?<![.!?…])[.!?…]++(?=\s|$|[{SPACELESS}])|(?<=[^\W\d_])[?!]++(?=[^\W\d_])"
    r"|[。！？；｡।؟\n]"
)
_ASCII_PIECE = re.compile(r"[a-z0-9]+|(?<![.!?])[.!?]++(?=\s|$)|(?<=[a-z])[?!]++(?=[a-z])|\n")


def sentence_words(text: str) -> list[list[str]]:
    """The word units of each sentence, in one pass over the text: the sentence ends of `sentences`,
    and a "?" or "!" between two letters; the units of `word_units`; sentences without words left out."""
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).lower()
    if "'" in folded or "\u2019" in folded:
        folded = _APOSTROPHE.sub("", folded)
    out: list[list[str]] = []
    words: list[str] = []
    if folded.isascii():
        for piece in _ASCII_PIECE.findall(folded):
            if piece[0] in _ENDS:
                if words:
                    out.append(words)
                    words = []
            else:
                words.append(piece)
    else:
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


# --- Tool results that report a failure ---------------------------------------------------------

#: the start of a result that reports a failure, tried at its first character only: "Error: ...",
#: "Error executing tool ...", "Exception in thread ...", "Traceback (most recent call last)",
#: "Failed to ...", an exception line of Python, Java or JavaScript ("KeyError: 'order_id'",
#: "java.lang.NullPointerException", "(sqlite3.OperationalError) ...", "ValueError('bad id')"),
#: a pydantic validation error of the tool's arguments ("1 validation error for BookFlight"),
#: Go's "panic:", "rpc error:", git's "fatal:", npm's "npm ERR!", Redis's "ERR ..." and a gRPC
#: status ("14 UNAVAILABLE: ..."). Words that open a heading or a record do not: "Error rate ...",
#: "Error codes:", "Exception handling ...", "Failed payments today: 3", "FAILED: 0".
_ERROR_PREFIX = re.compile(
    r"\s*(?:(?i:error(?:\s*(?:[:!(\[\u2014]|\.(?!\S)|\s-|\n|$)|\s+(?:\d|code\b|occurred|executing|calling|running|invoking"
    r"|in\b|while|during|when|from|fetching|processing|getting|reading|writing|connecting|creating|updating"
    r"|deleting|loading|parsing|sending|response|message\b))"
    r"|exception(?:\s*(?:[:!(\[]|\n|$)|\s+(?:in|occurred|while|during|when|raised|thrown|calling|executing|caught)\b)"
    r"|traceback\s*(?:\(most recent call|:)"
    r"|fail(?:ed|ure)(?:\s*[:!.(\-\u2014](?!\s*\d)|\s*$|\s+(?:to|with|because|due to|while|during|when)\b)"
    r"|time-?out\s*(?:!|\.(?!\S)|\n|$)|(?:rpc error|panic|fatal(?: error)?)\s*:|npm err!|segmentation fault)"
    r"|File \"[^\"\n]{1,300}\", line \d"
    r"|(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception|Timeout)(?:\s*[:(\[]|\s*\n|\s*$)"
    r"|(?:[A-Za-z_]\w{0,60}\.){0,8}(?:errors|exceptions)\.[A-Z]\w{0,80}\s*:"
    r"|\((?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception)\)"
    r"|(?:ERR|WRONGTYPE|NOAUTH|NOPERM) |HTTPS?ConnectionPool\(|<_(?:InactiveRpcError|MultiThreadedRendezvous)\b"
    r"|(?:1[0-6]|[1-9]) (?:CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS"
    r"|PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|OUT_OF_RANGE|UNIMPLEMENTED|INTERNAL"
    r"|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED):"
    r"|\d+ validation errors? for\b)"
)
#: what a short failure report says: "Permission denied", "HTTP 500", "Request failed with status
#: code 429", "connect ECONNREFUSED 127.0.0.1:5432", "socket hang up", "context deadline exceeded",
#: "Sorry, the refund service is currently unavailable." (searched in the first line only)
_ERROR_WORDS = Folded(
    r"\b(not found|does not exist|doesn'?t exist|invalid|(?:un|not )authori[sz]ed|not permitted|forbidden|permission denied|access denied"
    r"|not authenticated|unauthenticated|authentication (?:failed|required)|(?:bad|invalid) credentials"
    r"|timed out|(?:request|connection|connect|read|write|socket|gateway|operation|navigation|query|statement"
    r"|i/o|network|server|upstream|execution|tool|call|rpc|api|http) time-?out"
    r"|time-?out(?: of)?(?: \d+ ?(?:ms|s|seconds?))? (?:exceeded|expired|reached|occurred|error)"
    r"|(?:deadline|retries|quota|time limit) exceeded|rate limit(?:ed| exceeded)?|too many requests"
    r"|connection (?:refused|reset|aborted|failure|error|lost|closed)|due to (?:a )?time-?out"
    r"|(?:execution|runtime|tool|internal|network|database|unexpected) error|reset by peer|broken pipe|socket hang up"
    r"|net::err_\w+|name or service not known|temporary failure in name resolution"
    r"|no such (?:file|directory|table|column|host|key|bucket|tool)|segmentation fault"
    r"|upstream connect error|no healthy upstream|reset before headers|bad gateway|gateway time-?out|bad request"
    r"|certificate[ _]verify[ _]failed|blocked by cors policy|insufficient (?:funds|balance|permissions?|privileges)"
    r"|(?:syntax|parse|parsing) error|unknown (?:tool|function|command|action)\b|is not defined|no module named"
    r"|missing \d+ required (?:positional |keyword-only )?arguments?|unexpected keyword argument"
    r"|object has no attribute|object is not (?:subscriptable|callable|iterable)|index out of range|division by zero"
    r"|(?:card|payment) (?:was )?declined"
    r"|unknown error|an error occurred|something went wrong|internal server error|service unavailable"
    r"|(?:service|server|system|api|backend|database|site|endpoint|upstream|host)\s+(?:is\s+|are\s+)?"
    r"(?:currently\s+|temporarily\s+)?(?:unavailable|down|offline|unreachable|not (?:available|responding))"
    r"|(?:status(?: code)?|http)\s*[45]\d\d|exited with (?:exit )?(?:code|status) [1-9]\d*"
    r"|(?:request|call|execution|operation|tool|command|connection|fetch|search|lookup|resolution|navigation"
    r"|verification|authentication|handshake|query|upload|download) failed"
    r"|(?:could not|couldn'?t|cannot|can'?t|unable to|failed to) (?:find|locate|connect|complete|process|retrieve"
    r"|fetch|load|parse|resolve|reach|open|read|write|save|create|update|delete|access))\b"
)
#: a Node.js system error code ("connect ECONNREFUSED 127.0.0.1:5432", "getaddrinfo ENOTFOUND ...")
_ERRNO = re.compile(
    r"\bE(?:CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|NOTFOUND|AI_AGAIN|HOSTUNREACH|NETUNREACH|PIPE|NOENT|ACCES|PERM)\b"
)
#: the start of a listing whose lines may name errors without reporting one: search results,
#: headings, bullets, numbered items, a table, a list of codes ("Error codes: ...")
_LISTING = re.compile(
    r"\s*(?:(?i:title|url|source|snippet|results?|search results|(?:\w+ )?(?:error|status|exit) codes)\s*:"
    r"|#|[-*\u2022|>] |\d+[.)] |\[\d+\] |\[?\()"
)
#: the start of log lines (a time stamp, a level before a time stamp, logfmt): data a log search returned
_LOG_LINE = re.compile(
    r"\s*\[?(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\d\d:\d\d:\d\d|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
    r"|(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\]?\s+\[?\d{4}-\d\d-\d\d"
    r"|(?:time|ts|timestamp|level|lvl|severity)=)"
)
#: the title of an HTML error page ("<title>502 Bad Gateway</title>"), an XML error body (S3's
#: `<Error><Code>NoSuchKey</Code>...`, a SOAP `<soap:Fault>`)
_ERROR_PAGE = re.compile(
    r"<title>\s*(?:(?:error:?\s*)?[45]\d\d\b|(?:page |file )?(?:not found|forbidden|access denied"
    r"|service (?:temporarily )?unavailable|bad gateway|gateway time-?out|too many requests|internal server error)\b)"
    r"|<(?:\w+:)?(?:error|fault)>\s*<",
    re.I,
)
#: keys of a JSON error body whose short text says what failed (`{"detail": "Not Found"}`)
_MESSAGE_KEYS = ("detail", "message", "msg", "Message")
#: keys of a JSON tool result that carry its error (`errorMessage`: AWS Lambda; `isError`: MCP;
#: `Error`: AWS; `errno`/`errcode`: a serialised Node.js error, WeChat-style APIs)
_ERROR_KEYS = (
    "error", "errors", "errorMessage", "error_message", "exception", "isError", "is_error", "Error", "errno", "errcode",
)  # fmt: skip
#: values of an error key that say there is none (`{"error": "none"}`, `{"errcode": 0}`)
_NO_ERROR = frozenset({"", "none", "null", "nil", "false", "0", "ok", "success", "n/a"})
#: keys of a log record (`{"level": "error", "msg": ...}`): data, not an error body
_LOG_KEYS = ("level", "severity", "levelname", "lvl")
#: keys under which a tool's output is wrapped alone (`{"output": "Error: ..."}`)
_WRAPPER_KEYS = ("output", "result", "response", "content")
_FAILED_STATUS = frozenset({"error", "failed", "failure", "fail"})


def looks_like_tool_error(result: object) -> bool:
    """True when a tool result reports that the call failed.

    Text: a start such as `Error: ...`, an exception line or a traceback (Python, Java, Go, Node.js),
    a gRPC status; or a short first line that says what failed ("HTTP 500 Internal Server Error",
    "connect ECONNREFUSED ...", "the refund service is currently unavailable"); or an HTML error page
    or an XML error body. JSON: an error (`error`, `errors`, `errorMessage`, MCP's `isError`, ... not
    empty, null or "none"), `success` or `ok` false, a failed status (`"status": "failed"`, an HTTP
    status of 400 or more), a small error body (`{"detail": "Not Found"}`, FastAPI's list of
    validation errors), or a lone wrapper of one (`{"output": "Error: ..."}`); a list of text blocks
    reads as its text. Data that mentions errors is not a failure: log lines, a JSON list of records,
    search results or a list of error codes, a CSV with an `error` column, a log record."""
    return _reads_as_error(result, 0)


def _reads_as_error(result: object, depth: int) -> bool:
    if result is None or depth > 3:  # wrappers and text blocks nest; a hostile result may nest them deeply
        return False
    if isinstance(result, dict):
        return _dict_error(result, depth)
    if isinstance(result, list):
        return _list_error(result, depth)
    text = str(result).strip()
    if not text:
        return False
    first = text[0]
    if first in "{[":
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return _dict_error(parsed, depth)
        if isinstance(parsed, list):
            return _list_error(parsed, depth)
    elif first == "<":
        return bool(_ERROR_PREFIX.match(text) or _ERROR_PAGE.search(text, 0, 2000))
    if _LOG_LINE.match(text):
        return False
    if _ERROR_PREFIX.match(text):
        return True
    if len(text) >= 200:
        return False
    line = text.split("\n", 1)[0] if "\n" in text else text
    return not _LISTING.match(line) and _says_failure(line)


def _dict_error(result: dict[str, Any], depth: int) -> bool:
    for key in _ERROR_KEYS:
        value = result.get(key)
        if value and (not isinstance(value, str) or value.strip().lower() not in _NO_ERROR):
            return True
    if result.get("success") is False or result.get("ok") is False:
        return True
    status = next((result[key] for key in ("status", "status_code", "statusCode") if key in result), None)
    if isinstance(status, str):
        return status.strip().lower() in _FAILED_STATUS
    if isinstance(status, int) and not isinstance(status, bool):
        return 400 <= status < 600
    if len(result) == 1:
        key, value = next(iter(result.items()))
        if key in _WRAPPER_KEYS:
            return _reads_as_error(value, depth + 1)
        if key == "detail" and isinstance(value, list):  # FastAPI: [{"loc": [...], "msg": ..., "type": ...}]
            return any(isinstance(v, dict) and "msg" in v and "loc" in v for v in value)
        if key == "fault":  # an API gateway's or SOAP's fault: {"fault": {"faultstring": ...}}
            return bool(value)
    elif "content" in result and "isError" not in result and _text_blocks(result["content"]):
        return _reads_as_error(result["content"], depth + 1)  # an MCP result that does not say
    if len(result) > 3 or any(key in result for key in _LOG_KEYS):
        return False
    message = next((result[key] for key in _MESSAGE_KEYS if isinstance(result.get(key), str)), "")
    return len(message) < 200 and _says_failure(message)


def _says_failure(line: str) -> bool:
    """A short text says what failed (`_ERROR_WORDS`, a Node.js error code)."""
    return bool(_ERROR_WORDS.search(line) or ("E" in line and _ERRNO.search(line)))


def _list_error(result: list[Any], depth: int) -> bool:
    """A list of text blocks reads as its text; any other list is data (records, log entries, codes)."""
    if _text_blocks(result):
        return _reads_as_error("\n".join(block["text"] for block in result), depth + 1)
    return False


#: the keys of a text block (`{"type": "text", "text": ...}`; MCP adds `annotations` and `_meta`)
_BLOCK_KEYS = frozenset({"type", "text", "annotations", "_meta"})


def _text_blocks(value: object) -> bool:
    """A non-empty list of text blocks: `{"text": ...}` or `{"type": "text", "text": ...}`."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(b, dict)
            and isinstance(b.get("text"), str)
            and (len(b) == 1 or (b.get("type") == "text" and _BLOCK_KEYS.issuperset(b)))
            for b in value
        )
    )
