"""`scenarios export` (stored threads as replayable scenarios) and `simulate` (replay them against an app)."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click
import orjson
from rich.markup import escape

from tracing_eval.cli.common import config_option, counting, err, fail, friendly_errors, settings_for
from tracing_eval.config import ConfigError, Settings
from tracing_eval.store.sql import SqlStore
from tracing_eval.timespec import parse_since


def _time_option(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_since(value).timestamp()
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


@click.group()
def scenarios() -> None:
    """Scenarios from failed threads, for `simulate` (and DeepEval, RAGAS)."""


@scenarios.command("export")
@config_option
@click.option(
    "--from",
    "origin",
    type=click.Choice(["store", "review", "langfuse"]),
    default="store",
    show_default=True,
    help="Failed threads in the store, the local review queue, or the Langfuse review annotation queue.",
)
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only failures of this metric (repeatable).")
@click.option("--label", "labels", multiple=True, help="Only results with this label, passing or not (repeatable).")
@click.option("--since", default=None, help="Only threads active (review items created) since: 24h, 7d or an ISO time.")
@click.option("--until", default=None, help="... and before this time.")
@click.option(
    "--review-status",
    type=click.Choice(["open", "resolved", "superseded", "all"]),
    default="open",
    show_default=True,
    help="Review items to export (--from review or langfuse; Langfuse: open = PENDING, resolved = COMPLETED).",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many scenarios (newest first).")
@click.option(
    "--max-turns", type=click.IntRange(1, 100), default=None, help="Turn limit (default: the user's turns + 2)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["scenarios", "eval", "deepeval", "ragas"]),
    default="scenarios",
    show_default=True,
    help="scenarios (for simulate), eval (thread JSONL), deepeval (ConversationalGolden JSON), ragas (multi-turn JSONL).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Add to this file (scenarios already in it are skipped); default: standard output.",
)
@friendly_errors
def scenarios_export(
    config_path: Path | None,
    origin: str,
    metrics: tuple[str, ...],
    labels: tuple[str, ...],
    since: str | None,
    until: str | None,
    review_status: str,
    limit: int | None,
    max_turns: int | None,
    fmt: str,
    out_path: Path | None,
) -> None:
    """Turn failed threads into scenarios: goal, persona, failure, turn limit, original transcript."""
    from tracing_eval.failed_threads import Selection
    from tracing_eval.scenario_formats import merge_into, render
    from tracing_eval.scenarios import ScenarioError

    settings = settings_for(config_path, quiet=True)
    selection = Selection(
        metrics=frozenset(metrics),
        labels=frozenset(labels),
        since=_time_option(since, "--since"),
        until=_time_option(until, "--until"),
        review_status=None if review_status == "all" else review_status,
        limit=limit,
    )
    found = asyncio.run(_export(settings, origin, selection, max_turns))
    try:
        if out_path is None:
            sys.stdout.buffer.write(render(found, fmt)[0])
            err().print(f"{len(found)} scenario(s) from {origin}")
        else:
            added, present = merge_into(out_path, found, fmt)
            err().print(f"{added} new scenario(s) written to {out_path}, {present} already there ({origin})")
    except ScenarioError as exc:
        fail(str(exc))


async def _export(settings: Settings, origin: str, selection: Any, max_turns: int | None) -> list[Any]:
    """Failed threads from the chosen origin, then their scenarios (goals from the judge when configured)."""
    from tracing_eval import failed_threads
    from tracing_eval.judge import JudgeClient
    from tracing_eval.scenarios import scenarios_from

    if origin == "langfuse":
        from tracing_eval.app import langfuse_failed_threads

        failed = await langfuse_failed_threads(settings, selection)
    else:
        store = SqlStore(settings.store.url)
        await store.open()
        try:
            read = failed_threads.from_review if origin == "review" else failed_threads.from_store
            failed = await read(store, selection)
        finally:
            await store.close()
    judge = JudgeClient.from_settings(settings.judge)
    try:
        return await scenarios_from(failed, judge, max_turns)
    finally:
        if judge is not None:
            await judge.close()


@click.command()
@click.argument("scenarios_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
@click.option(
    "--target",
    required=True,
    metavar="URL|MODULE:FUNCTION",
    help="The bot: an OpenAI-compatible base URL (with --model), or a Python callable taking the messages.",
)
@click.option("--model", default=None, help="Model to ask at a URL target.")
@click.option(
    "--system-prompt",
    default=None,
    help="The bot's system prompt, or @FILE (default: each scenario's system prompt from production).",
)
@click.option("--api-key-env", default=None, metavar="VAR", help="Environment variable with the URL target's API key.")
@click.option(
    "--user",
    "user_kind",
    type=click.Choice(["judge", "replay"]),
    default="judge",
    show_default=True,
    help="judge: the judge model plays the user; replay: the original user's messages, in order (no model).",
)
@click.option("--max-turns", type=click.IntRange(1, 100), default=None, help="Override every scenario's turn limit.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=None,
    help="Conversations at once (default: judge.max_concurrency).",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the transcripts (eval input) here; default: standard output.",
)
@friendly_errors
def simulate(
    scenarios_file: Path,
    config_path: Path | None,
    target: str,
    model: str | None,
    system_prompt: str | None,
    api_key_env: str | None,
    user_kind: str,
    max_turns: int | None,
    concurrency: int | None,
    out_path: Path | None,
) -> None:
    """Play each scenario's user against the bot and write the conversations as `eval` input.

    Exit codes: 0 every scenario simulated, 1 some could not be (the others are written), 2 bad input
    or options, 3 the judge cannot be used.
    """
    import os

    from tracing_eval.offline import JudgeUnavailable
    from tracing_eval.scenarios import ScenarioError, read_scenarios
    from tracing_eval.simulate import SimulationError, run_simulation, target_from

    settings = settings_for(config_path, quiet=True)
    try:
        loaded = read_scenarios(scenarios_file.read_bytes(), str(scenarios_file))
        if system_prompt is not None and system_prompt.startswith("@"):
            system_prompt = Path(system_prompt[1:]).read_text(encoding="utf-8")
        api_key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not api_key:
            raise SimulationError(f"--api-key-env {api_key_env}: the variable is not set")
        bot = target_from(target, model=model, api_key=api_key)
    except (ScenarioError, SimulationError, OSError) as exc:
        fail(str(exc))
    progress, advance = counting("simulating", len(loaded))
    try:
        with progress:
            done, user_name = asyncio.run(
                run_simulation(
                    settings,
                    loaded,
                    bot,
                    user_kind,
                    system_prompt=system_prompt,
                    max_turns=max_turns,
                    concurrency=concurrency,
                    on_done=advance,
                )
            )
    except JudgeUnavailable as exc:
        fail(str(exc), code=3)
    lines = b"".join(orjson.dumps(d.eval_line(user_name, bot.name)) + b"\n" for d in done if d.error is None)
    if out_path is None:
        sys.stdout.buffer.write(lines)
    else:
        out_path.write_bytes(lines)
    failed = [d for d in done if d.error is not None]
    stops = ", ".join(f"{k} {v}" for k, v in sorted(Counter(d.stop_reason for d in done if d.error is None).items()))
    err().print(
        f"simulated {len(done) - len(failed)} of {len(done)} scenario(s) with user {user_name}: {stops or 'none'}"
    )
    for d in failed:
        err().print(f"[red]not simulated[/red] {escape(d.scenario.id)}: {escape(str(d.error))}")
    if failed:
        sys.exit(1)
