"""Fault-injection points the test suite drives through environment variables; inert when they are unset.

``CKPTPROF_FAULT_MARK_DIR``: at the start of each stage of a run, ``stage-<name>`` is created there and the
ranks' per-shard marks (``rank<N>``) are cleared, so a test can wait until a stage has provably begun (and, for
a replay pass, until a rank of that pass has finished a shard) before it sends a signal.
``CKPTPROF_FAULT_HOLD_STAGE=<name>``: that stage waits ``CKPTPROF_FAULT_HOLD_S`` seconds (default 60) before
it starts, a window in which the signal is certain to land in that stage.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STAGES = ("probe", "cache", "replay", "faithful", "check", "report")


def stage_begins(name: str) -> None:
    marks = os.environ.get("CKPTPROF_FAULT_MARK_DIR")
    if marks:
        for old in Path(marks).glob("rank*"):
            old.unlink(missing_ok=True)
        (Path(marks) / f"stage-{name}").write_text(str(os.getpid()))
    if os.environ.get("CKPTPROF_FAULT_HOLD_STAGE") == name:
        time.sleep(float(os.environ.get("CKPTPROF_FAULT_HOLD_S", "60")))
