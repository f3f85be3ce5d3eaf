"""Settings of the OTLP evaluation-event sink: the `[sinks.otlp]` section (env `TRACING_EVAL_SINKS__OTLP__<KEY>`)."""

from __future__ import annotations

from pydantic import Field

from tracing_eval.settings_base import SettingsSection


class OtlpSinkSettings(SettingsSection):
    endpoint: str | None = Field(
        None,
        description="OTLP/HTTP logs endpoint for evaluation events; default: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, "
        "else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs.",
    )
    service_name: str = Field("tracing-eval", description="Resource service.name of the evaluation events.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers (e.g. auth) for the endpoint."
    )
    timeout_seconds: float = Field(10.0, gt=0, description="Timeout of one export.")
