"""What the commands share: consoles, error handling, the config option, progress bars, settings."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tracing_eval import logging as te_logging
from tracing_eval import registry
from tracing_eval.config import ConfigError, Settings, load_settings
from tracing_eval.extras import missing_extra_message
from tracing_eval.report import thread_record
from tracing_eval.store.base import Store
from tracing_eval.store.sql import StoreError
from tracing_eval.transcripts import TranscriptError

F = TypeVar("F", bound=Callable[..., Any])


def either(names: list[str]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


#: For --help: what the registries hold (tracing_eval.registry)
SOURCE_SPECS = either(registry.source_specs().split(", "))
SINK_NAMES = either(sorted(registry.sinks()))


def out() -> Console:
    """Standard output; made per call so COLUMNS and redirection are honoured."""
    return Console()


def err() -> Console:
    return Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    err().print(f"[bold red]error:[/bold red] {escape(message)}")
    sys.exit(code)


def missing_extra(exc: ModuleNotFoundError) -> str:
    """The line naming the extra that installs the missing module; any other missing module is a bug."""
    message = missing_extra_message(exc)
    if message is None:
        raise exc
    return message


def friendly_errors(fn: F) -> F:
    """Turn configuration and store errors, and a missing optional part, into one clear line and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, StoreError, TranscriptError) as exc:
            fail(str(exc))
        except ModuleNotFoundError as exc:
            fail(missing_extra(exc))

    return cast(F, wrapper)


def config_option(fn: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        help="TOML config file (default: ./tracing-eval.toml if present).",
    )(fn)


def counting(label: str, total: int) -> tuple[Progress, Callable[[], None]]:
    """A transient progress bar of `total` items on a terminal, and the callback that advances it."""
    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
        disable=not err().is_terminal,
    )
    task = progress.add_task(label, total=total)
    return progress, lambda: progress.advance(task)


def settings_for(config_path: Path | None, *, quiet: bool = False, **overrides: Any) -> Settings:
    """Settings, with logging configured; `quiet` commands log warnings and up unless a level is set."""
    settings = load_settings(config_path, **overrides)
    level = settings.logging.level
    if quiet and "level" not in settings.logging.model_fields_set:
        level = "warning"
    te_logging.configure(level, settings.logging.format)
    return settings


async def stored_records(store: Store) -> list[dict[str, Any]]:
    """The stored results as one record per thread, in the schema `eval` writes."""
    by_thread: dict[str, list[Any]] = {}
    for r in await store.results():
        by_thread.setdefault(r.thread_key, []).append(r.result)
    records = []
    for key, results in by_thread.items():
        rec = thread_record(key, results)
        rec["thread_key"] = key
        records.append(rec)
    return records


async def evaluate_with_progress(
    settings: Settings, metrics: Any, threads: list[Any], runs: int, *, explicit: bool
) -> Any:
    """`offline.evaluate_runs` with a progress bar on a terminal."""
    from tracing_eval.offline import evaluate_runs

    progress, advance = counting("evaluating", len(threads) * runs)
    with progress:
        return await evaluate_runs(settings, metrics, threads, runs, explicit=explicit, on_done=advance)
