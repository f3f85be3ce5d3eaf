"""Langfuse connector: a source (v4 `/v2/observations` or v3 `/traces`), a score sink and review routing.

settings = LangfuseSettings()                      # keys and host from LANGFUSE_* env
source = LangfuseSource(settings)                  # Source protocol, name "langfuse"
sink = LangfuseSink(settings)                      # Sink protocol, name "langfuse"

Names are loaded on first use, so `tracing_eval.connectors.langfuse.plugin` (the entry points) imports the settings alone.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LangfuseClient": "tracing_eval.connectors.langfuse.client",
    "LangfuseError": "tracing_eval.connectors.langfuse.client",
    "SELF_MARKER": "tracing_eval.connectors.langfuse.settings",
    "LangfuseSettings": "tracing_eval.connectors.langfuse.settings",
    "parse_since": "tracing_eval.connectors.langfuse.settings",
    "LangfuseSink": "tracing_eval.connectors.langfuse.sink",
    "LangfuseSource": "tracing_eval.connectors.langfuse.source",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tracing_eval.connectors.langfuse' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
