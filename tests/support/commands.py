"""Check `tracing-eval ...` command lines written in docs and deploy files against the real CLI.

`check_cli(args)` walks the click groups to the subcommand, asks for its `--help` through click's
CliRunner, and parses the arguments with the command's own parser (unknown options, missing option
values, unknown choices, missing or extra positional arguments are errors), without running it.
`commands_in_markdown(text)` finds the command lines in a page's shell code blocks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import click
from click.testing import CliRunner

from tracing_eval.cli import main

SCRIPT = "tracing-eval"
_SHELL_OPERATORS = {"&", "&&", "|", "||", ";", ">", ">>", "2>&1", "<"}
_COMMAND = re.compile(r"(?<![^\s/=(])tracing-eval\s+(?=[a-z])")
_SHELLS = ("sh", "bash", "shell", "console", "")


@dataclass(frozen=True)
class Parsed:
    path: tuple[str, ...]
    options: dict[str, object]


def check_cli(args: Sequence[str]) -> Parsed:
    """`args` are the words after `tracing-eval`; raises AssertionError on anything the CLI would refuse."""
    cmd: click.Command = main
    path: list[str] = []
    rest = list(args)
    while isinstance(cmd, click.Group):
        assert rest and not rest[0].startswith("-"), f"`tracing-eval {' '.join(args)}`: no subcommand"
        name = rest.pop(0)
        sub = cmd.commands.get(name)
        assert sub is not None, f"`tracing-eval {' '.join(args)}`: no command {' '.join([*path, name])!r}"
        cmd, path = sub, [*path, name]
    helped = CliRunner().invoke(main, [*path, "--help"])
    assert helped.exit_code == 0, helped.output
    for word in rest:
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            assert flag in helped.output, f"`tracing-eval {' '.join(args)}`: {flag} is not in `{' '.join(path)} --help`"
    ctx = click.Context(cmd, info_name=" ".join(path))
    try:
        options, extra, _ = cmd.make_parser(ctx).parse_args(list(rest))
    except click.UsageError as exc:
        raise AssertionError(f"`tracing-eval {' '.join(args)}`: {exc.format_message()}") from None
    assert not extra, f"`tracing-eval {' '.join(args)}`: unexpected arguments {extra}"
    for param in cmd.params:
        if param.required and param.name not in options:
            raise AssertionError(f"`tracing-eval {' '.join(args)}`: {param.human_readable_name} is required")
        if param.name in options and isinstance(param.type, click.Choice):
            values = options[param.name] if isinstance(options[param.name], list) else [options[param.name]]
            for value in values:
                assert value in param.type.choices, (
                    f"`tracing-eval {' '.join(args)}`: {value!r} not in {param.type.choices}"
                )
    return Parsed(tuple(path), dict(options))


def split_command(line: str) -> list[list[str]]:
    """The argument lists of every `tracing-eval <command> ...` in one shell line."""
    found = []
    for match in _COMMAND.finditer(line):
        first = line[match.end() :].split(maxsplit=1)[0]
        if first == SCRIPT or ":" in first:
            continue  # a container, service or image named tracing-eval, not the command
        words = []
        for word in shlex.split(line[match.end() :], comments=True):
            if word in _SHELL_OPERATORS or word.startswith(("2>", ">")):
                break
            words.append(word)
        found.append(words)
    return found


def shell_lines(text: str) -> Iterator[str]:
    """Lines of ```sh / ```bash / ```console code blocks, continuation lines joined."""
    fenced = shell = False
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced, shell = (False, False) if fenced else (True, stripped[3:].strip() in _SHELLS)
            pending = ""
            continue
        if not shell:
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield pending + stripped
        pending = ""


def commands_in_markdown(text: str) -> list[list[str]]:
    return [words for line in shell_lines(text) for words in split_command(line.removeprefix("$ "))]
