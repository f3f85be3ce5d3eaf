"""`tracing-eval run` tunes the garbage collector for long-lived batches (in a child process: the
setting is process-wide)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import gc
from tracing_eval.worker import GC_THRESHOLDS, tune_gc
before = gc.get_threshold()
tune_gc()
print(before != GC_THRESHOLDS, gc.get_threshold() == GC_THRESHOLDS, gc.get_freeze_count() > 1000)
"""


def test_tune_gc_freezes_start_up_objects_and_raises_the_thresholds() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]
