"""Shard files that changed under a running replay: truncated, replaced by a shorter file, or removed.

A memory-mapped file that shrinks leaves its mapping pointing past the new end: the kernel answers a touch of
those pages with SIGBUS (the rank dies, naming nothing) and ``madvise`` with EFAULT (a raw errno). Both say
nothing a user can act on, so whoever sees the failure - the rank for a shard error, the parent for a rank
killed by a signal - compares each planned shard's size with what is on disk now and names the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ckptprof.loader.plan import ReplayPlan
from ckptprof.units import human_bytes


@dataclass(frozen=True)
class ChangedFile:
    path: str
    planned_bytes: int
    now_bytes: int | None  # None: the file is gone

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def cause(self) -> str:
        """'the file shrank while it was read (16.00 MB when the run started, 8.00 MB now)'."""
        if self.now_bytes is None:
            return f"the file was removed while it was read ({human_bytes(self.planned_bytes)} when the run started)"
        return (
            f"the file shrank while it was read ({human_bytes(self.planned_bytes)} when the run started, "
            f"{human_bytes(self.now_bytes)} now)"
        )


def changed_file(path: str, planned_bytes: int) -> ChangedFile | None:
    """The file if it is now shorter than planned or gone; None while it still holds every planned byte."""
    try:
        now = os.stat(path).st_size
    except FileNotFoundError:
        return ChangedFile(path, planned_bytes, None)
    except OSError:
        return None  # unreadable now for another reason: the original error says more than a guess
    return ChangedFile(path, planned_bytes, now) if now < planned_bytes else None


def changed_files(plan: ReplayPlan) -> list[ChangedFile]:
    """Every planned shard that shrank or vanished since the plan was made, in plan order."""
    out: list[ChangedFile] = []
    for model in plan.models:
        for shard in model.shards:
            if shard.error is not None:
                continue  # unusable from the start (missing, invalid): nothing changed under the run
            changed = changed_file(shard.path, shard.bytes)
            if changed is not None:
                out.append(changed)
    return out


def explain_shard_error(plan: ReplayPlan, file: str, error: str) -> str:
    """A failed shard's error, led by the cause when that shard's file shrank or vanished while it was read."""
    for model in plan.models:
        for shard in model.shards:
            if shard.name == file and shard.error is None:
                changed = changed_file(shard.path, shard.bytes)
                if changed is not None and not error.startswith("the file "):
                    return f"{changed.cause()}: {error}"
    return error


def explain_signal_death(plan: ReplayPlan, reason: str, signal_name: str) -> str:
    """A rank killed by SIGBUS: name the shard whose file shrank (the usual cause), or say what SIGBUS means."""
    if signal_name != "SIGBUS":
        return reason
    changed = changed_files(plan)
    if changed:
        files = "; ".join(f"{c.path}: {c.cause()}" for c in changed[:3])
        more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
        return f"{reason} reading a memory-mapped shard: {files}{more}"
    return (
        f"{reason}: a memory-mapped page could not be read (a storage I/O error, or a shard truncated or "
        "replaced while it was mapped and restored since)"
    )
