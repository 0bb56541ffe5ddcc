"""The page cache shared with other runs: a warm run that lost its pages says so, and a cold run looks for the
warm runs its drop would spoil before it drops.

A ``--cache warm`` run next to a ``--cache cold`` run on the same files read 114 MB of its 128 MB from storage, was
called storage-bound, and its note still said "warmed: 100% resident". Two measurements tell: what each rank
found missing from the page cache as it opened each shard (``nonresident_bytes``, recorded by every strategy), and
the files' residency once the run is over (mincore/cachestat, ``checkpoint.fs.resident_bytes``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ckptprof import inprogress
from ckptprof.checkpoint import fs
from ckptprof.session import ModelInfo, Session
from ckptprof.units import human_bytes

DEFAULT_COLD_WAIT_S = 30.0
_POLL_S = 0.5


def cold_wait_s() -> float:
    """CKPTPROF_COLD_WAIT_S (seconds a cold run waits for warm runs on its files to end; 0: do not wait)."""
    text = os.environ.get("CKPTPROF_COLD_WAIT_S", "").strip()
    try:
        return max(0.0, float(text)) if text else DEFAULT_COLD_WAIT_S
    except ValueError:
        return DEFAULT_COLD_WAIT_S


def _overlap(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether two runs read the same files: a path of one is the other's or under it."""
    return any(a == b or a.startswith(b + "/") or b.startswith(a + "/") for a in mine for b in theirs)


def spoiled_runs(paths: Sequence[str | Path]) -> list[inprogress.RunEntry]:
    """Other runs in progress on these files that a drop would spoil (warm or as-is: a cold one drops them too)."""
    mine = [os.path.realpath(os.fspath(p)) for p in paths]
    return [e for e in inprogress.others() if e.live and e.cache != "cold" and _overlap(mine, e.files)]


def before_dropping(
    paths: Sequence[str | Path],
    say: Callable[[str], None],
    wait_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Wait (up to ``wait_s``) for the warm runs on these files to end; the note to keep when some did not."""
    limit = cold_wait_s() if wait_s is None else wait_s
    waiting = spoiled_runs(paths)
    if not waiting:
        return None
    say(
        f"waiting up to {limit:g} s for {inprogress.words(waiting)} on these files to end before dropping "
        "their pages (CKPTPROF_COLD_WAIT_S)"
    )
    started = time.monotonic()
    while waiting and time.monotonic() - started < limit:
        sleep(min(_POLL_S, limit))
        waiting = spoiled_runs(paths)
    if not waiting:
        return None
    note = (
        f"dropped the page cache of these files while {inprogress.words(waiting)} on them were in progress "
        f"(waited {time.monotonic() - started:.0f} s): their warm figures are spoiled, and they say so"
    )
    say(note)
    return note


def changed_under_warm_run(session: Session) -> None:
    """When the warm cache was lost under a warm run, say so in each model's cache note and in the notes."""
    if session.config.cache != "warm":
        return
    for model in session.models:
        warmed = model.resident_bytes_before
        tolerance = fs.drop_tolerance(model.total_bytes)
        # Only where warming was seen to work: on FUSE without kernel_cache (sshfs) or files whose page cache the
        # kernel hides from this user, residency reads 0 before and after, and there is nothing to compare.
        if warmed is None or model.total_bytes - warmed > tolerance:
            continue
        during = _missing_during(session, model)
        after = _missing_after(model)
        missing = max(during, after)
        if missing <= tolerance:
            continue
        share = 100 * missing / max(1, model.total_bytes)
        where = (
            f"{human_bytes(during)} was not in the page cache when its shards were read"
            if during >= after
            else f"{human_bytes(after)} was gone from the page cache when the run ended"
        )
        here = [os.path.realpath(model.path)]
        culprits = [
            e
            for e in inprogress.others(since=_started(session))
            if (e.cache or "").startswith("cold")
            and _overlap(here, e.files)  # cold, or cold then warm: both drop
        ]
        why = (
            f"{inprogress.words(culprits)} dropping it"
            if culprits
            else "another process evicting it (a cold run's drop, memory pressure)"
        )
        said = f"the page cache changed under this run: {where} ({share:.0f}%), {why}"
        model.cache_note = f"{model.cache_note}; then {said}"
        session.notes.append(
            f"{model.role}: {said}: this is not a warm load, whatever its cache note says it started from; "
            "run it again alone"
        )


def _missing_during(session: Session, model: ModelInfo) -> int:
    """The most any rank found missing from the page cache at its shards' starts."""
    worst = 0
    for rank in session.ranks:
        for loaded in rank.models:
            if loaded.role == model.role:
                worst = max(worst, sum(min(s.nonresident_bytes, s.bytes) for s in loaded.shards))
    return worst


def _missing_after(model: ModelInfo) -> int:
    resident = 0
    for shard in model.shards:
        try:
            resident += fs.resident_bytes(Path(model.path) / shard.file)
        except OSError:
            return 0  # gone or unreadable now: the replay's own errors say what happened
    return max(0, model.total_bytes - resident)


def _started(session: Session) -> float | None:
    try:
        from datetime import datetime

        return datetime.fromisoformat(session.created).timestamp()
    except (TypeError, ValueError):
        return None
