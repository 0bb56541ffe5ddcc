"""One pass over every rank (spawned here, or this process's share of a torchrun launch), with its progress bar,
and the py-spy profiles of the ranks gathered into the session."""

from __future__ import annotations

import json
import linecache
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


def local_source_line(file: str, line: int) -> str:
    """The text of ``file``'s line ``line`` as this machine holds it: the run's ranks are its own processes, so the
    paths py-spy wrote are ours to read. Relative or pseudo names ("<frozen abc>") give "": linecache would look a
    bare name up along sys.path and could read another file of that name."""
    return linecache.getline(file, line) if os.path.isabs(file) else ""


def collect_py_spy(session: Session, spy: PySpySession) -> None:
    """The ranks' profiles as artifacts, each one's top frames in the session, and a note per rank py-spy missed."""
    from ckptprof.analysis.stacks import top_frames

    paths = spy.finish()
    session.artifacts["py_spy"] = {str(rank): path for rank, path in paths.items()}
    tops: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for rank, path in paths.items():
        try:
            tops[str(rank)] = top_frames(json.loads(Path(path).read_text()), source_line=local_source_line)
        except (OSError, ValueError) as exc:
            spy.errors[rank] = f"unreadable py-spy profile {path}: {exc}"
    session.extra.py_spy_top_frames = tops
    for rank, error in sorted(spy.errors.items()):
        session.notes.append(f"py-spy rank {rank}: {error}")
