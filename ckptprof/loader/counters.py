"""The kernel's counters a recorder reads around each phase: major faults and bytes fetched from storage, for the
process and for the calling thread alone (``RUSAGE_THREAD``, ``/proc/thread-self/io``)."""

from __future__ import annotations

import os
import resource
import threading
from contextlib import suppress
from typing import Any, Protocol


class Counters(Protocol):
    def major_faults(self) -> int: ...

    def storage_read_bytes(self) -> int: ...


# Linux only; elsewhere the process's count.
_RUSAGE_THREAD: int = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


class _ThreadIo(threading.local):
    """This thread's ``/proc/thread-self/io``, opened once per thread (re-read with pread: a few microseconds)."""

    fd: int | None = None
    failed: bool = False
    # The last read's (blocks read per getrusage, read_bytes): see ProcessCounters.thread_counts.
    blocks: int = -1
    read_bytes: int = 0

    def __del__(self) -> None:  # the thread ended: its io file is of no further use
        if self.fd is not None:
            with suppress(OSError):
                os.close(self.fd)


def process_storage_read_bytes(proc: Any) -> int | None:
    """What the process ``proc`` (a psutil.Process) has read from block storage so far (/proc/PID/io); None where
    the kernel does not say (no /proc/PID/io in some containers)."""
    import psutil

    try:
        return int(proc.io_counters().read_bytes)
    except (AttributeError, OSError, psutil.Error):
        return None


class ProcessCounters:
    """Major faults and bytes fetched from storage by this process (the kernel's per-task io accounting),
    and the same for the calling thread alone, so concurrent threads' shards keep their own counters."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        self._thread_io = _ThreadIo()

    def major_faults(self) -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_majflt

    def storage_read_bytes(self) -> int:
        # no /proc/self/io (some containers): report 0, noted by the analysis
        return process_storage_read_bytes(self._proc) or 0

    def thread_major_faults(self) -> int:
        return resource.getrusage(_RUSAGE_THREAD).ru_majflt

    def thread_storage_read_bytes(self) -> int:
        io = self._thread_io
        if io.failed:
            return self.storage_read_bytes()
        try:
            if io.fd is None:
                io.fd = os.open("/proc/thread-self/io", os.O_RDONLY)
            # Read twice per shard: find the field in the raw bytes rather than decode and split every line.
            raw = os.pread(io.fd, 512, 0)
            at = raw.find(b"\nread_bytes:")  # a field of its own line, after rchar, wchar, syscr and syscw
            if at >= 0:
                at += len(b"\nread_bytes:")
                end = raw.find(b"\n", at)
                return int(raw[at : end if end >= 0 else None])
        except (OSError, ValueError):
            pass
        io.failed = True  # no per-thread accounting here: fall back to the process's (shared) counter
        return self.storage_read_bytes()

    def thread_io_marks(self) -> tuple[int, int]:
        """The calling thread's (major faults, 512-byte blocks read from storage) in one getrusage call - under a
        microsecond, cheap enough to take around every deserialize block. Unlike /proc/thread-self/io this counts
        blocks, not bytes; the recorder only asks whether they moved."""
        if not hasattr(resource, "RUSAGE_THREAD"):
            return 0, 0  # only the process's counts here: other threads' reads must not move this one's time
        usage = resource.getrusage(_RUSAGE_THREAD)
        return usage.ru_majflt, usage.ru_inblock

    def thread_counts(self) -> tuple[int, int]:
        """The calling thread's (major faults, storage bytes) in one call: the recorder reads both at every
        shard's open and close, and each attribute look-up and call counts on a shard of half a millisecond.

        ``getrusage`` gives the faults and the thread's blocks read (``ru_inblock``: its ``read_bytes`` in 512-byte
        units), so ``/proc/thread-self/io`` is read only when that count moved since the thread's last read: a warm
        shard costs one system call instead of two (the read of /proc took ~3/4 of the pair on the 2-core VM), a
        cold one reads the exact bytes as before. Bytes that moved by less than one block without moving the count
        (a file system accounting odd sizes) show at the next read that does: the total stays exact."""
        usage = resource.getrusage(_RUSAGE_THREAD)
        io = self._thread_io
        if usage.ru_inblock != io.blocks or io.failed:
            io.read_bytes = self.thread_storage_read_bytes()
            io.blocks = usage.ru_inblock
        return usage.ru_majflt, io.read_bytes
