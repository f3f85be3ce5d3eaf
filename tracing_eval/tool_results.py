"""Tool results that report a failure: `looks_like_tool_error`, which assembly and transcripts use
when a tool span or message carries no error status of its own."""

from __future__ import annotations

import re
from typing import Any

import orjson

from tracing_eval.text import Folded

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
