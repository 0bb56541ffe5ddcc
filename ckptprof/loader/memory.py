"""A rank's resident memory around the load: what it held before, and its peak while loading.

``ru_maxrss`` is the peak over the process's whole life: the CUDA context, torch's libraries, a pinned ring, and
under torchrun an earlier pass in the same process. Linux lets a process reset its own peak (writing 5 to
``/proc/self/clear_refs`` resets VmHWM, since 4.0), so the peak of the load itself can be read from
``/proc/self/status`` afterwards. Where that is not possible the load's peak is reported as unknown (0).
"""

from __future__ import annotations

from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str, status: Path = STATUS) -> int:
    try:
        for line in status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])  # "VmHWM:   123456 kB"
    except (OSError, ValueError, IndexError):
        pass
    return 0


def current_rss_bytes(status: Path = STATUS) -> int:
    """Resident set now (VmRSS), 0 where /proc is not there."""
    return _status_kib("VmRSS", status) * 1024


def peak_rss_bytes(status: Path = STATUS) -> int:
    """Peak resident set since the process started or since :func:`reset_peak_rss` (VmHWM)."""
    return _status_kib("VmHWM", status) * 1024


def reset_peak_rss(clear_refs: Path = CLEAR_REFS) -> bool:
    """Restart the peak from the current resident set; False where the kernel does not allow it."""
    try:
        clear_refs.write_text("5")
    except OSError:
        return False
    return True
