"""Sources and sinks by name, from the entry-point groups `tracing_eval.sources` and `tracing_eval.sinks`.

A package adds a sink by declaring, in its own pyproject.toml,

    [project.entry-points."tracing_eval.sinks"]
    my-sink = "my_package.sink:SINK"          # a SinkEntry

and a source the same way under `tracing_eval.sources` (a SourceEntry). The entry's name is what
`--sink`, `--source` and `[sinks] enabled` take. An entry may bring a settings section (a pydantic
model at a TOML path such as `sinks.my-sink`), which becomes part of `Settings` with its keys,
environment variables and errors like every other section. Entries are light objects: the heavy
parts (clients, SDKs) are imported by `build`, when the sink or source is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from tracing_eval.settings_base import ConfigError

if TYPE_CHECKING:
    from tracing_eval.config import Settings
    from tracing_eval.sinks import Sink
    from tracing_eval.sources import Source
    from tracing_eval.store.base import Store
    from tracing_eval.telemetry import Telemetry

SOURCES_GROUP = "tracing_eval.sources"
SINKS_GROUP = "tracing_eval.sinks"
#: Payload kinds the outbox carries: evaluation results and review items
KINDS = frozenset({"result", "review"})

M = TypeVar("M", bound=BaseModel)


class RegistryError(ConfigError):
    """An entry point that cannot be loaded or is not what its group holds."""


@dataclass(frozen=True)
class Section:
    """A settings section an entry adds: its TOML table (`langfuse`, `sinks.webhook`) and its model,
    whose defaults must all be valid (the section is there whether the entry is used or not)."""

    path: str
    model: type[BaseModel]


def _section(settings: Settings, model: type[M]) -> M:
    value = settings.section(model)
    assert isinstance(value, model)
    return value


@dataclass(frozen=True)
class SinkContext:
    """What a sink is built from."""

    settings: Settings
    store: Store

    def section(self, model: type[M]) -> M:
        """The settings section this sink's entry declared with `model`."""
        return _section(self.settings, model)


@dataclass(frozen=True)
class SinkEntry:
    """A sink as registered: the payload kinds it takes (`result`, `review`) and how to build it."""

    kinds: frozenset[str]
    build: Callable[[SinkContext], Sink]
    settings: Section | None = None

    def __post_init__(self) -> None:
        if not self.kinds or not self.kinds <= KINDS:
            raise ValueError(f"a sink takes some of {sorted(KINDS)}, not {sorted(self.kinds)}")


@dataclass(frozen=True)
class SourceContext:
    """What a source is built from: `argument` is what followed `NAME:` in its spec; `complete` says
    the input is finished (`run --once`: a file's last line counts without its newline); `since`
    is the start of a backfill; `outbox_sinks` maps the sinks delivered through the outbox to the
    kinds each takes (a receiver holds off while they are behind)."""

    settings: Settings
    store: Store
    argument: str | None = None
    complete: bool = False
    since: datetime | None = None
    telemetry: Telemetry | None = None
    outbox_sinks: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def section(self, model: type[M]) -> M:
        """The settings section this source's entry declared with `model`."""
        return _section(self.settings, model)


@dataclass(frozen=True)
class SourceEntry:
    """A source as registered. `argument` names what its spec takes after `NAME:` (e.g. `PATH`;
    None: the spec is the bare name). `listens`: it receives over the network while `run` serves,
    so `run --once` has nothing to pull from it. `sinks`: sinks it implies, where the results of
    what it reads go back (Langfuse: its scores)."""

    build: Callable[[SourceContext], Source]
    settings: Section | None = None
    argument: str | None = None
    listens: bool = False
    sinks: tuple[str, ...] = ()


def _load(group: str, kind: type[object]) -> dict[str, object]:
    found: dict[str, object] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        if ep.name in found:
            continue  # the same distribution seen twice on the path (e.g. an editable install)
        try:
            entry = ep.load()
        except Exception as exc:
            raise RegistryError(f"entry point {ep.name} = {ep.value} of {group} cannot be loaded: {exc}") from exc
        if not isinstance(entry, kind):
            raise RegistryError(
                f"entry point {ep.name} = {ep.value} of {group} is a {type(entry).__name__}, not a {kind.__name__}"
            )
        found[ep.name] = entry
    return found


@cache
def sinks() -> dict[str, SinkEntry]:
    """Every registered sink by name."""
    return {name: entry for name, entry in _load(SINKS_GROUP, SinkEntry).items() if isinstance(entry, SinkEntry)}


@cache
def sources() -> dict[str, SourceEntry]:
    """Every registered source by name."""
    return {name: entry for name, entry in _load(SOURCES_GROUP, SourceEntry).items() if isinstance(entry, SourceEntry)}


def sink(name: str) -> SinkEntry:
    """The sink registered as `name`; an unknown name is an error listing the known ones."""
    known = sinks()
    if name not in known:
        raise ConfigError(f"unknown sink {name!r}; known sinks: {', '.join(sorted(known)) or 'none'}")
    return known[name]


def source(name: str) -> SourceEntry:
    """The source registered as `name`; an unknown name is an error listing the known specs."""
    known = sources()
    if name not in known:
        raise ConfigError(f"unknown source {name!r}; known sources: {source_specs()}")
    return known[name]


def source_specs() -> str:
    """The specs `--source` takes, for help and errors: `otlp-file:PATH, otlp-http, ...`."""
    return ", ".join(f"{n}:{e.argument}" if e.argument else n for n, e in sorted(sources().items()))


def sections() -> dict[str, type[BaseModel]]:
    """The settings sections the registered sources and sinks add, by TOML path. Two entries may
    share a section (the Langfuse source and sink) only with the same model."""
    found: dict[str, type[BaseModel]] = {}
    entries: list[tuple[str, SinkEntry | SourceEntry]] = [
        *((f"sink {n}", e) for n, e in sinks().items()),
        *((f"source {n}", e) for n, e in sources().items()),
    ]
    for what, entry in entries:
        if entry.settings is None:
            continue
        path, model = entry.settings.path, entry.settings.model
        if found.setdefault(path, model) is not model:
            raise RegistryError(
                f"{what} declares the settings section [{path}] as {model.__name__}, "
                f"but another entry declares it as {found[path].__name__}"
            )
    return found
