"""`tracing-eval` command line: run the sidecar, evaluate files, read results and the review queue.

The commands live in the modules of this package, one subject each; this module gathers them
under the `tracing-eval` group.
"""

from __future__ import annotations

import click

from tracing_eval.cli import calibrate, doctor, evaluate, run, scenarios, stored
from tracing_eval.cli.common import SINK_NAMES, SOURCE_SPECS

__all__ = ["SINK_NAMES", "SOURCE_SPECS", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracing-eval")
def main() -> None:
    """Evaluate LLM conversation threads from traces and write the scores back."""


for command in (
    run.run,
    run.backfill,
    evaluate.eval_cmd,
    scenarios.scenarios,
    scenarios.simulate,
    calibrate.calibrate,
    doctor.doctor,
    stored.results,
    stored.inspect_cmd,
    stored.review,
):
    main.add_command(command)
