"""The user docs agree with the code: commands parse, links resolve, quoted error messages exist.

`configuration.md` has its own test (test_configdoc.py); the deploy files theirs (test_deploy.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO
from tests.support.commands import check_cli, commands_in_markdown
from tracing_eval import server
from tracing_eval.config import ReceiverSettings
from tracing_eval.connectors.otlp.receiver import OtlpReceiver

DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "deploy" / "README.md", REPO / "examples" / "README.md", *DOCS.glob("*.md")])
NEW_PAGES = ["getting-started.md", "configuration.md", "sources-and-sinks.md", "troubleshooting.md"]

#: Messages troubleshooting.md quotes, as fragments that stay literal in the code. When the code's
#: wording changes, this test fails until the page is updated.
MESSAGES = [
    "unknown key (check the spelling)",
    "invalid configuration (",
    " does not exist",
    " is not valid TOML: ",
    "unknown source ",
    "unknown or unavailable sink(s) ",
    "`run --once` pulls sources; give --source otlp-file:PATH or langfuse (the receiver needs `run`)",
    "unknown metric(s) ",
    "sink webhook: set [sinks.webhook] urls (TRACING_EVAL_SINKS__WEBHOOK__URLS)",
    " is not an http(s) URL",
    "sink 'otlp' has no endpoint: set [sinks.otlp] endpoint, ",
    "sink 'otlp' cannot emit: the OpenTelemetry SDK is disabled (OTEL_SDK_DISABLED)",
    "review routes send to sinks that are not enabled (",
    "; enable them with --sink",
    " has schema version ",
    "Point store.url at a new database or upgrade.",
    "cannot open the store at ",
    "cannot listen on ",
    "; set --http or [http] address",
    "unsupported Content-Type ",
    "; use gzip, deflate or none",
    "body is not valid JSON: ",
    " is not a hex string",
    " must be {size} bytes, got ",
    "is all zeros",
    "; the limit is ",
    "body exceeds the limit of ",
    "body decompresses to more than the limit of ",
    "missing or wrong bearer token",
    "the store is behind; retry later",
    "the store could not write the data; retry later",
    "too many requests in progress; retry later",
    "the sinks are behind (",
    " deliveries wait in the outbox; the limit is ",
    "store write failed",
    "OTLP request refused",
    "judge tier skipped: no judge configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)",
    "not configured: judged metrics are skipped (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)",
    "); check judge.api_key or OPENAI_API_KEY",
    "access denied (",
    "); check the key's permissions for this model",
    "); check judge.model and judge.base_url",
    "judge call failed after ",
    "rate limited (HTTP 429)",
    "; the endpoint asks to wait ",
    "the endpoint rejected the JSON-schema response format (",
    'set judge.structured_output = "json_object"',
    "malformed answer after one corrective re-ask: ",
    "timed out after ",
    "cannot reach ",
    " tokens per thread exhausted (",
    "judge call retried",
    "Langfuse keys missing: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY",
    "no project for these keys (organization key?)",
    "langfuse call retried",
    "the store did not answer within ",
    "the scheduler is not running",
    "a tick has been running for ",
    "the last tick finished",
    " has failed every delivery for ",
    "tick failed; the next tick retries",
    "judge unusable: ",
    "not asked, the judge is unusable: ",
    ": needs a judge and none is configured (set TRACING_EVAL_JUDGE__MODEL and OPENAI_API_KEY)",
    ": in the baseline but not in this run (not selected, or its judge is not configured)",
    " (scored / applicable results) is below baseline ",
    " error result(s) per run, baseline ",
    " is a transcript (eval input), not eval output: ",
    " shares no thread ids with ",
    "--user judge: the judge model plays the user, and none is configured",
    "Langfuse has no annotation queue named ",
]


def source_text() -> str:
    return "\n".join(
        p.read_text(encoding="utf-8")
        for folder in ("tracing_eval", "connectors")
        for p in (REPO / folder).rglob("*.py")
    )


def test_quoted_messages_are_in_the_code_and_on_the_page() -> None:
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    code = source_text()
    missing_in_code = [m for m in MESSAGES if m not in code]
    missing_on_page = [m for m in MESSAGES if "{" not in m and m.strip(" (;") not in page]
    assert not missing_in_code, f"the code no longer says: {missing_in_code}"
    assert not missing_on_page, f"troubleshooting.md does not quote: {missing_on_page}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_tracing_eval_command_parses(page: Path) -> None:
    for words in commands_in_markdown(page.read_text(encoding="utf-8")):
        check_cli(words)


def test_the_new_pages_show_commands() -> None:
    for name in ("getting-started.md", "sources-and-sinks.md"):
        assert len(commands_in_markdown((DOCS / name).read_text(encoding="utf-8"))) >= 5, name


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, spaces to dashes, punctuation dropped."""
    text = re.sub(r"[`*_]", lambda m: "_" if m[0] == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m[1]) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: link to {target} is broken"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: no heading #{anchor} in {resolved.name}"


def test_readme_more_links_every_doc_page() -> None:
    more = (REPO / "README.md").read_text(encoding="utf-8").split("## More", 1)[1]
    for page in DOCS.glob("*.md"):
        assert f"docs/{page.name}" in more, f"README's More section does not link docs/{page.name}"
    assert "deploy/README.md" in more


def test_http_paths_named_in_the_new_pages_are_served() -> None:
    receiver = OtlpReceiver(SimpleNamespace(), ReceiverSettings())  # type: ignore[arg-type]
    served = {route.path for route in server.http_app(receiver.routes(), SimpleNamespace()).routes}
    for name in NEW_PAGES:
        text = (DOCS / name).read_text(encoding="utf-8")
        for path in set(re.findall(r"(?<![\w.])(/(?:healthz|readyz|metrics|v1/traces|v1/logs))\b", text)):
            assert path in served, f"{name}: {path} is not served"
        for found in re.findall(r"127\.0\.0\.1:4318(/[\w/]+)", text):
            assert found in served, f"{name}: {found} is not served"
