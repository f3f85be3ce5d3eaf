"""`python -m tracing_eval` is the same as the `tracing-eval` command."""

from tracing_eval.cli import main

main()
