"""Settings of the webhook review sink: the `[sinks.webhook]` section (env `TRACING_EVAL_SINKS__WEBHOOK__<KEY>`)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from tracing_eval.settings_base import SettingsSection, empty_is_unset


class WebhookSettings(SettingsSection):
    urls: list[str] = Field(default_factory=list, description="URLs that receive review items as signed JSON POSTs.")
    _blank_secret = field_validator("secret", mode="before")(empty_is_unset)
    secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key for the signature header; set it from the environment."
    )
    timeout_seconds: float = Field(10.0, gt=0, description="Timeout of one POST.")
