"""What every settings section shares: the error type, the base model and the common validators.

The engine's sections (`tracing_eval.config`) and the sections connectors add through the registry
(`tracing_eval.registry.Section`) both build on this module, so a connector's settings never import
the engine's config (which loads the connectors' sections).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(Exception):
    """The configuration cannot be used; the message says which key and why."""


class SettingsSection(BaseModel):
    """A `[section]` of the TOML file: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


def empty_is_unset(value: object) -> object:
    """An empty secret (e.g. `TRACING_EVAL_RECEIVER__AUTH_TOKEN=`) means unset, not an empty secret."""
    return None if isinstance(value, str) and not value.strip() else value


def host_port(v: str) -> str:
    host, sep, port = v.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be HOST:PORT, got {v!r}")
    return v
