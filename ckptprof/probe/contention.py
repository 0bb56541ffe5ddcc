"""Whether a probe measured the hardware alone, or while something else used it.

A probe taken while other ckptprof runs were in progress, or while the block device under the checkpoint served
someone else's reads, measures a share of the hardware, not its ceiling. Such a probe says so in a note that starts
with ``PREFIX``, and is never kept for reuse.

The rules, both measured:
- other runs: any other ckptprof run registered as in progress (``ckptprof.inprogress``) at any time between the
  probe's start and its end;
- a busy device: the block device read more than ``FOREIGN_FRACTION`` beyond the probe's own cold reads (and more
  than ``FOREIGN_FLOOR_BYTES``) while they ran - /proc/diskstats' sectors read, which count every process's
  reads. Network and FUSE file systems have no block device here; only the first rule holds for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ckptprof import inprogress
from ckptprof.checkpoint import diskstats
from ckptprof.units import human_bytes

PREFIX = "probed under contention: "
FOREIGN_FRACTION = 0.25
FOREIGN_FLOOR_BYTES = 64 * 1024 * 1024


def is_contended(notes: Sequence[str]) -> bool:
    return any(note.startswith(PREFIX) for note in notes)


def other_runs_note(since_unix: float) -> str | None:
    """The note for other runs in progress since ``since_unix`` (the probe's start), or None."""
    others = inprogress.others(since=since_unix)
    if not others:
        return None
    return (
        f"{PREFIX}{inprogress.words(others)} in progress while these ceilings were measured: they share the "
        "storage, memory and devices, so the figures may be low; this probe is not kept for reuse"
    )


def device_busy_note(
    device: str, before: diskstats.DiskSample | None, after: diskstats.DiskSample | None, own_bytes: int
) -> str | None:
    """The note for a block device that read much more than the probe itself did, or None."""
    if before is None or after is None:
        return None
    foreign = after.read_since(before) - own_bytes
    if foreign <= max(FOREIGN_FLOOR_BYTES, FOREIGN_FRACTION * own_bytes):
        return None
    return (
        f"{PREFIX}the device {device} read {human_bytes(foreign)} for others while the storage probe read "
        f"{human_bytes(own_bytes)}: the storage figures are a share of the device, not its ceiling; this probe "
        "is not kept for reuse"
    )
