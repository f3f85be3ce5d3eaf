"""The registry of metrics by name: the built-in ones and those other packages declare.

A metric class registers itself when it is defined (`MetricBase.__init_subclass__`). The built-in
metrics are the modules imported by `tracing_eval.metrics.deterministic` and `...judged`; another
package adds its own under the entry-point group `tracing_eval.metrics` (the entry point names a
module or a metric class; loading it defines, and so registers, the metrics):

    [project.entry-points."tracing_eval.metrics"]
    acme = "acme_eval.metrics"
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from tracing_eval.settings_base import ConfigError

if TYPE_CHECKING:
    from tracing_eval.metrics.base import MetricBase

GROUP = "tracing_eval.metrics"

_REGISTERED: dict[str, type[MetricBase]] = {}


class RegistryError(ConfigError):
    """A metric cannot be registered or loaded; the message names the metric and where it comes from."""


def register(cls: type[MetricBase]) -> None:
    """Add a metric class under its `name`; two different classes may not share a name."""
    for attr in ("version", "tier", "scopes", "description"):
        if not hasattr(cls, attr):
            raise RegistryError(f"metric {cls.name!r} ({cls.__module__}.{cls.__qualname__}) does not set {attr!r}")
    known = _REGISTERED.get(cls.name)
    if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise RegistryError(
            f"metric name {cls.name!r} is taken by {known.__module__}.{known.__qualname__}; "
            f"{cls.__module__}.{cls.__qualname__} needs another name"
        )
    _REGISTERED[cls.name] = cls


@cache
def _load() -> None:
    """Import the built-in metrics, then every entry point of the group (once per process)."""
    import tracing_eval.metrics.deterministic  # noqa: F401  (importing registers)
    import tracing_eval.metrics.judged  # noqa: F401

    for ep in entry_points(group=GROUP):
        try:
            ep.load()
        except Exception as exc:
            raise RegistryError(f"entry point {ep.name} = {ep.value} of {GROUP} cannot be loaded: {exc}") from exc


def metric_classes() -> dict[str, type[MetricBase]]:
    """Every registered metric class by name, built-in first, in the order they were defined."""
    _load()
    return dict(_REGISTERED)


def reload_entry_points() -> None:
    """Look at the installed entry points again (after installing a package in a running process)."""
    _load.cache_clear()
