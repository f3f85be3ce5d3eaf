"""The `tracing-eval` command (also `python -m tracing_eval`).

Importing the CLI reads every registered source and sink (their settings sections are part of the
settings model), so an entry point of another package that cannot be loaded fails that import; it
is reported here in one line, naming the entry point, instead of as a traceback.
"""

import sys

import click

from tracing_eval.registry import RegistryError


def main() -> None:
    try:
        from tracing_eval.cli import main as cli
    except RegistryError as exc:
        click.echo(f"error: {exc} (fix or uninstall the package that declares it)", err=True)
        sys.exit(2)
    cli()


if __name__ == "__main__":
    main()
