"""Bad input, full version: the malformed-request corpus and the fuzzing properties with many examples.

    .venv/bin/python bench/bad_input.py                      # 3,000 examples per property (x4 for decoders)
    .venv/bin/python bench/bad_input.py --examples 20000

The test suite runs `tests/test_bad_input.py` (206 malformed OTLP requests against an in-process
receiver and a running sidecar) and `tests/test_fuzz.py` (hypothesis, 150 examples per property, 600
for the decoders). This runs the same tests with `FUZZ_EXAMPLES` set higher; hypothesis stays
derandomized, so a run is repeatable and a larger count explores further. It prints the pytest summary
and the time taken, and exits with pytest's code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=3000, help="hypothesis examples per property")
    args = ap.parse_args()
    env = {**os.environ, "FUZZ_EXAMPLES": str(args.examples)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_bad_input.py",
        "tests/test_fuzz.py",
    ]
    started = time.monotonic()
    code = subprocess.run(cmd, cwd=REPO, env=env).returncode
    print(f"FUZZ_EXAMPLES={args.examples}: pytest exit {code} after {time.monotonic() - started:.0f} s", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
