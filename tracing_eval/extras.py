"""Optional parts of the install (`pip install 'tracing-eval[NAME]'`) and the modules each brings.

The default install scores OTLP files and the receiver's traffic into SQLite with every metric; a
PostgreSQL store, the Langfuse source and sink, and the OTLP evaluation sink need their extra. A
command that reaches one without it fails with one line naming the extra (see `cli.friendly_errors`).
"""

from __future__ import annotations

#: Extra -> the top-level modules (or module prefixes) it installs that the code imports.
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("asyncpg",),
    "langfuse": ("langfuse",),
    "otlp-sink": ("opentelemetry.sdk",),
}


def extra_of(module: str | None) -> str | None:
    """The extra that installs `module` (a dotted name, as `ModuleNotFoundError.name` gives it)."""
    for extra, prefixes in EXTRAS.items():
        if module and any(module == p or module.startswith(p + ".") for p in prefixes):
            return extra
    return None


def missing_extra_message(exc: ModuleNotFoundError) -> str | None:
    """One line saying which extra to install for the missing module, or None when it is not optional."""
    extra = extra_of(exc.name)
    if extra is None:
        return None
    return f"this needs the optional part {extra!r}, which is not installed: pip install 'tracing-eval[{extra}]'"
