"""Sources and sinks by name from their entry points (tracing_eval.registry), chosen and checked by
tracing_eval.app: unknown names list the known ones, a sink's kinds decide what it may be sent, and
a connector's settings section is part of the settings, with its key and variable in errors."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from pydantic import BaseModel

from tracing_eval import app, registry
from tracing_eval.config import ConfigError, Settings, load_settings
from tracing_eval.connectors.langfuse.settings import LangfuseSettings
from tracing_eval.connectors.otlp.sink_settings import OtlpSinkSettings
from tracing_eval.connectors.review.settings import WebhookSettings


def test_the_built_in_sources_and_sinks_come_from_the_entry_points() -> None:
    assert set(registry.sources()) == {"otlp-http", "otlp-file", "langfuse"}
    assert set(registry.sinks()) == {"otlp", "webhook", "langfuse"}
    assert {n: sorted(e.kinds) for n, e in registry.sinks().items()} == {
        "otlp": ["result"],
        "webhook": ["review"],
        "langfuse": ["result", "review"],
    }
    assert registry.source("otlp-http").listens and registry.source("otlp-file").argument == "PATH"
    assert registry.source("langfuse").sinks == ("langfuse",)  # scores go back where the threads came from


def test_unknown_names_are_errors_that_list_the_known_ones() -> None:
    settings = Settings()
    with pytest.raises(
        ConfigError, match=r"unknown source 'kafka:topic'; known sources: langfuse, otlp-file:PATH, otlp-http"
    ):
        app.source_specs(["kafka:topic"], settings)
    with pytest.raises(
        ConfigError, match=r"unknown or unavailable sink\(s\) kafka; available: local, langfuse, otlp, webhook"
    ):
        app.sink_names(["kafka"], settings, [])
    with pytest.raises(ConfigError, match=r"unknown sink 'kafka'; known sinks: langfuse, otlp, webhook"):
        registry.sink("kafka")
    with pytest.raises(ConfigError, match=r"source otlp-file needs an argument: otlp-file:PATH"):
        app.source_specs(["otlp-file"], settings)
    with pytest.raises(ConfigError, match=r"source otlp-http takes no argument, got 'otlp-http:4318'"):
        app.source_specs(["otlp-http:4318"], settings)


def test_specs_come_from_the_flags_or_the_configured_sources() -> None:
    settings = Settings(sources={"otlp_http": True, "otlp_files": ["a.jsonl"], "langfuse": True, "enabled": ["x-src"]})
    assert settings.sources.specs() == ["otlp-http", "otlp-file:a.jsonl", "langfuse", "x-src"]
    specs = app.source_specs(["otlp-file:b.jsonl", "langfuse"], settings)
    assert [str(s) for s in specs] == ["otlp-file:b.jsonl", "langfuse"]
    # reading Langfuse implies its sink; the outbox sinks carry the kinds each takes
    names = app.sink_names(["otlp"], settings, specs)
    assert names == ["otlp", "langfuse"]
    assert app.outbox_sinks(["local", *names]) == {"otlp": ["result"], "langfuse": ["result", "review"]}


def test_a_review_route_must_reach_a_sink_that_takes_review_items() -> None:
    settings = Settings(review={"routes": [{"name": "events", "destinations": ["local", "otlp"]}]})
    with pytest.raises(ConfigError, match=r"review routes send to sinks that are not enabled \(events: otlp\)"):
        app.sink_names(["otlp"], settings, [])  # enabled, but otlp takes results only
    hooks = Settings(review={"routes": [{"name": "hooks", "destinations": ["webhook"]}]})
    with pytest.raises(ConfigError, match=r"\(hooks: webhook\)"):
        app.sink_names(["otlp"], hooks, [])
    assert app.sink_names(["webhook"], hooks, []) == ["webhook"]


def test_connector_sections_are_settings_with_their_keys_and_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    assert isinstance(settings.section(LangfuseSettings), LangfuseSettings)
    assert settings.section(OtlpSinkSettings) is settings.sinks.otlp  # type: ignore[attr-defined]
    assert settings.section(WebhookSettings) is settings.sinks.webhook  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="is not the settings section of a registered source or sink"):
        settings.section(BaseModel)
    monkeypatch.setenv("TRACING_EVAL_LANGFUSE__SINCE", "soon")
    monkeypatch.setenv("TRACING_EVAL_SINKS__WEBHOOK__TIMEOUT_SECONDS", "0")
    with pytest.raises(ConfigError) as caught:
        load_settings(None)
    message = str(caught.value)
    assert "langfuse.since:" in message and "env TRACING_EVAL_LANGFUSE__SINCE" in message
    assert "sinks.webhook.timeout_seconds:" in message and "TOML key [sinks.webhook] timeout_seconds" in message


def entry_point(name: str, value: str, group: str = registry.SINKS_GROUP) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=group)


def test_an_entry_point_that_is_not_an_entry_or_does_not_load_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry_point("dumps", "json:dumps")])
    with pytest.raises(
        registry.RegistryError,
        match=r"entry point dumps = json:dumps of tracing_eval.sinks is a function, not a SinkEntry",
    ):
        registry._load(registry.SINKS_GROUP, registry.SinkEntry)
    monkeypatch.setattr(registry, "entry_points", lambda group: [entry_point("gone", "no_such_module:SINK")])
    with pytest.raises(
        registry.RegistryError,
        match=r"entry point gone = no_such_module:SINK of tracing_eval.sinks cannot be loaded: No module named 'no_such_module'",
    ):
        registry._load(registry.SINKS_GROUP, registry.SinkEntry)


def test_two_entries_may_share_a_section_only_with_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    class Other(BaseModel):
        pass

    def build(ctx: registry.SinkContext) -> object:
        raise AssertionError("not built")

    clash = registry.SinkEntry(kinds=frozenset({"result"}), build=build, settings=registry.Section("langfuse", Other))  # type: ignore[arg-type]
    monkeypatch.setattr(registry, "sinks", lambda: {"clash": clash})
    with pytest.raises(
        registry.RegistryError,
        match=r"source langfuse declares the settings section \[langfuse\] as LangfuseSettings, but another entry declares it as Other",
    ):
        registry.sections()
    with pytest.raises(ValueError, match="a sink takes some of"):
        registry.SinkEntry(kinds=frozenset({"metrics"}), build=build)  # type: ignore[arg-type]
