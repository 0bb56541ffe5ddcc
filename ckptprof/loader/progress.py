"""The replay's progress on the terminal: a bar per model over all ranks' shards."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TextIO

from ckptprof.loader.plan import ReplayPlan
from ckptprof.session import ShardTiming

ProgressFn = Callable[[int, str, ShardTiming], None]


class ProgressPrinter:
    """A tqdm bar per model over all ranks' shards, with a compact per-rank count in its postfix."""

    def __init__(
        self,
        plan: ReplayPlan,
        label: str = "",
        enabled: bool = True,
        file: TextIO | None = None,
        ncols: int | None = None,
    ) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._enabled = enabled
        self._plan = plan
        self._label = label
        self._totals = {m.role: len(m.shards) for m in plan.models}
        self._counts: dict[tuple[str, int], int] = {}
        self._bars: dict[str, Any] = {}
        self._lock = threading.Lock()
        # Where the bars go and how wide they are: the terminal's (stderr) unless a test gives its own.
        self._where: dict[str, Any] = {"file": file, "ncols": ncols}

    def __call__(self, rank: int, role: str, timing: ShardTiming) -> None:
        if not self._enabled:
            return
        with self._lock:
            bar = self._bars.get(role)
            if bar is None:
                desc = f"{self._label}{role} shards x {self._plan.tp} ranks"
                bar = self._tqdm(
                    total=self._totals.get(role, 0) * self._plan.tp,
                    desc=desc,
                    unit="shard",
                    leave=False,
                    **self._where,
                )
                self._bars[role] = bar
            self._counts[(role, rank)] = self._counts.get((role, rank), 0) + 1
            bar.update(1)
            if self._plan.tp > 1:
                per_rank = " ".join(str(self._counts.get((role, r), 0)) for r in range(self._plan.tp))
                bar.set_postfix_str(f"per rank: {per_rank} /{self._totals.get(role, 0)}", refresh=False)

    def close(self) -> None:
        # The lowest bar first, the top one (position 0) last: tqdm blanks a lower bar's row and moves back up
        # without returning to the first column, which only the top bar's close does. Closed top first, a target +
        # draft run's summary began at the last column and its first line broke in two.
        for bar in reversed(list(self._bars.values())):
            bar.close()
        self._bars.clear()
