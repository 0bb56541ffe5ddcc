"""How long the block device under a checkpoint was busy: the kernel's ``io_ticks`` (what ``iostat`` calls %util).

A decomposed pass can say how long fetching the bytes took when nothing else ran; only the device itself can say
how long it was busy while SGLang's own sequence ran, with its copies and page faults interleaved. ``io_ticks`` is
the wall time, in ms, during which the device had at least one request in flight - sampled around a load, it is a
direct measure of "storage was busy N% of the load", with no decomposition at all.

It is a device-wide count: other processes' I/O on the same device counts too, and there is no block device under
NFS, FUSE, tmpfs or overlay roots (``device_for`` returns None there and callers fall back to the decomposition).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")
SYS_DEV_BLOCK = Path("/sys/dev/block")
SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own sector size


@dataclass(frozen=True)
class DiskSample:
    io_ticks_ms: int
    read_bytes: int
    in_flight: int = 0  # requests issued to the device and not yet completed, now

    def busy_since(self, before: DiskSample) -> float:
        """Seconds the device was busy between ``before`` and this sample."""
        return max(0, self.io_ticks_ms - before.io_ticks_ms) / 1000.0

    def read_since(self, before: DiskSample) -> int:
        return max(0, self.read_bytes - before.read_bytes)


def device_for(path: str | Path) -> str | None:
    """The /proc/diskstats name of the block device (or partition) holding ``path``; None without one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    if major == 0:
        return None  # an anonymous device: NFS, FUSE, tmpfs, overlay - nothing in /proc/diskstats to read
    try:
        # /sys/dev/block/MAJ:MIN links to .../block/<disk>[/<partition>]: the link's last part is the stats name.
        name = os.path.basename(os.readlink(SYS_DEV_BLOCK / f"{major}:{minor}"))
    except OSError:
        return None
    return name if sample(name) is not None else None


def sample(device: str, text: str | None = None) -> DiskSample | None:
    """The device's counters now (or parsed from ``text``, the contents of /proc/diskstats)."""
    if text is None:
        try:
            text = DISKSTATS.read_text()
        except OSError:
            return None
    for line in text.splitlines():
        fields = line.split()
        # major minor name reads merged sectors ms writes merged sectors ms in_flight io_ticks ...
        if len(fields) >= 13 and fields[2] == device:
            try:
                return DiskSample(
                    io_ticks_ms=int(fields[12]), read_bytes=int(fields[5]) * SECTOR, in_flight=int(fields[11])
                )
            except ValueError:
                return None
    return None
