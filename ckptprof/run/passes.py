"""One pass over every rank (spawned here, or this process's share of a torchrun launch), with its progress bar,
and the py-spy profiles of the ranks gathered into the session."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ckptprof.loader import ranks as ranks_mod
from ckptprof.loader import torchrun
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.progress import ProgressPrinter
from ckptprof.profiling.pyspy import PySpySession
from ckptprof.session import RankResult, Session


def run_ranks(
    plan: ReplayPlan,
    faithful: bool,
    progress: bool,
    group: torchrun.TorchrunGroup | None,
    spy: PySpySession | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> list[RankResult] | None:
    """Every rank's result of one pass (None on a torchrun rank other than 0: rank 0 gathers them)."""
    label = "faithful: " if faithful else ""
    show = progress and (group is None or group.is_main)
    printer = ProgressPrinter(plan, label=label, enabled=show)
    try:
        if group is not None:
            if spy is not None:
                spy.attach(group.rank, os.getpid())
            return torchrun.run_joined(group, plan, faithful=faithful, progress=printer)
        return ranks_mod.run_spawned(
            plan, faithful=faithful, progress=printer, on_start=spy.attach if spy is not None else on_start
        )
    finally:
        printer.close()


def collect_py_spy(session: Session, spy: PySpySession) -> None:
    """The ranks' profiles as artifacts, each one's top frames in the session, and a note per rank py-spy missed."""
    from ckptprof.analysis.stacks import top_frames

    paths = spy.finish()
    session.artifacts["py_spy"] = {str(rank): path for rank, path in paths.items()}
    tops: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for rank, path in paths.items():
        try:
            tops[str(rank)] = top_frames(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            spy.errors[rank] = f"unreadable py-spy profile {path}: {exc}"
    session.extra.py_spy_top_frames = tops
    for rank, error in sorted(spy.errors.items()):
        session.notes.append(f"py-spy rank {rank}: {error}")
