"""What the review connector registers (pyproject.toml, entry points): the webhook sink for review items."""

from __future__ import annotations

from tracing_eval.connectors.review.settings import WebhookSettings
from tracing_eval.registry import Section, SinkContext, SinkEntry
from tracing_eval.settings_base import ConfigError
from tracing_eval.sinks import Sink


def _webhook(ctx: SinkContext) -> Sink:
    from tracing_eval.connectors.review.webhook import WebhookSink

    settings = ctx.section(WebhookSettings)
    if not settings.urls:
        raise ConfigError("sink webhook: set [sinks.webhook] urls (TRACING_EVAL_SINKS__WEBHOOK__URLS)")
    return WebhookSink(settings)


WEBHOOK = SinkEntry(kinds=frozenset({"review"}), build=_webhook, settings=Section("sinks.webhook", WebhookSettings))
