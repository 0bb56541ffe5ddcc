"""Where each stage of a run begins: a clock the CLI reads to show every stage's time, and fault-injection points
the test suite drives through environment variables (inert when they are unset).

``CLOCK``: once restarted (``ckptprof run`` does, as it starts), every stage's start is kept on ``time.monotonic``,
the clock the rank processes stamp their own load's start with, so the two can be set side by side.

``CKPTPROF_FAULT_MARK_DIR``: at the start of each stage of a run, ``stage-<name>`` is created there and the
ranks' per-shard marks (``rank<N>``) are cleared, so a test can wait until a stage has provably begun (and, for
a replay pass, until a rank of that pass has finished a shard) before it sends a signal.
``CKPTPROF_FAULT_HOLD_STAGE=<name>``: that stage waits ``CKPTPROF_FAULT_HOLD_S`` seconds (default 60) before
it starts, a window in which the signal is certain to land in that stage.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

STAGES = ("probe", "cache", "replay", "faithful", "check", "report")


class StageClock:
    """The start of each stage since ``restart``; a clock never restarted keeps nothing (a library caller that
    replays a thousand times must not grow a list)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self._began: float | None = None
        self._starts: list[tuple[str, float]] = []

    def restart(self) -> None:
        self._began = self.now()
        self._starts = []

    def begin(self, name: str) -> None:
        if self._began is not None:
            self._starts.append((name, self.now()))

    def intervals(self) -> list[tuple[str, float]]:
        """(stage, its start) in order, from ("setup", the restart); empty when never restarted."""
        if self._began is None:
            return []
        return [("setup", self._began), *self._starts]


CLOCK = StageClock()


def stage_begins(name: str) -> None:
    CLOCK.begin(name)
    marks = os.environ.get("CKPTPROF_FAULT_MARK_DIR")
    if marks:
        for old in Path(marks).glob("rank*"):
            old.unlink(missing_ok=True)
        (Path(marks) / f"stage-{name}").write_text(str(os.getpid()))
    if os.environ.get("CKPTPROF_FAULT_HOLD_STAGE") == name:
        time.sleep(float(os.environ.get("CKPTPROF_FAULT_HOLD_S", "60")))
