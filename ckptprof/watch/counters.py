"""One rank process's kernel counters at one instant, read from /proc without stopping it (no ptrace).

``/proc/PID/stat`` (faults, CPU time, threads, RSS) is readable for any process; ``/proc/PID/io`` (bytes read
from storage, read calls) only for one's own processes or as root, so it may come back None. What the threads
are doing is classified by the kernel sampler's own rule (ckptprof.profiling.sampler: storage, page cache, cpu,
waiting), from each thread's state and faults since the previous sample.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.profiling.sampler import CLASSES, ThreadState, classify, process_class, read_thread

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# stat's fields after the command name (split after its last ')'), proc(5)
_MAJFLT, _UTIME, _STIME, _THREADS, _RSS = 9, 11, 12, 17, 21


@dataclass(frozen=True)
class ProcCounters:
    """Cumulative counters since the process started (what /proc says), at ``at`` (monotonic seconds)."""

    at: float
    read_bytes: int | None  # fetched from storage on its behalf (page-fault reads included); None: unreadable
    syscr: int | None  # read system calls
    rchar: int | None  # bytes returned by read calls, from the page cache or not
    major_faults: int
    user_s: float
    system_s: float
    rss_bytes: int
    threads: int
    state: str = "waiting"  # the most telling class among its threads (sampler.CLASSES)
    thread_classes: dict[str, int] = field(default_factory=dict)


def parse_stat(text: str) -> tuple[int, float, float, int, int]:
    """(major faults, user s, system s, threads, rss bytes) from /proc/PID/stat."""
    fields = text[text.rindex(")") + 2 :].split()
    return (
        int(fields[_MAJFLT]),
        int(fields[_UTIME]) / CLOCK_TICKS,
        int(fields[_STIME]) / CLOCK_TICKS,
        int(fields[_THREADS]),
        int(fields[_RSS]) * PAGE_BYTES,
    )


def parse_io(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            out[key.strip()] = int(value)
    return out


class ProcessReader:
    """Reads one process's counters; keeps its threads' previous states for the fault-based classes."""

    def __init__(self, pid: int, proc_root: Path = Path("/proc"), threads: bool = True) -> None:
        self.pid = pid
        self.proc = proc_root / str(pid)
        self.threads = threads
        self.io_error: str | None = None
        self._last: dict[int, ThreadState] = {}

    def read(self, at: float) -> ProcCounters | None:
        """The counters now; None once the process is gone (or a zombie)."""
        try:
            stat = (self.proc / "stat").read_text()
        except OSError:
            return None
        if stat[stat.rindex(")") + 2 :].startswith("Z"):
            return None
        majflt, user_s, system_s, nthreads, rss = parse_stat(stat)
        io: dict[str, int] = {}
        if self.io_error is None:
            try:
                io = parse_io((self.proc / "io").read_text())
            except PermissionError:
                self.io_error = (
                    f"/proc/{self.pid}/io is not readable (another user's process): storage bytes and read calls "
                    "are unknown; run watch as that user or as root"
                )
            except OSError:
                return None
        classes: Counter[str] = Counter()
        if self.threads:
            classes = self._thread_classes()
        return ProcCounters(
            at=at,
            read_bytes=io.get("read_bytes"),
            syscr=io.get("syscr"),
            rchar=io.get("rchar"),
            major_faults=majflt,
            user_s=user_s,
            system_s=system_s,
            rss_bytes=rss,
            threads=nthreads,
            state=process_class(classes.elements()) if classes else "waiting",
            thread_classes={c: classes[c] for c in CLASSES if classes[c]},
        )

    def _thread_classes(self) -> Counter[str]:
        try:
            tids = [int(t) for t in os.listdir(self.proc / "task")]
        except OSError:
            return Counter()
        out: Counter[str] = Counter()
        seen: dict[int, ThreadState] = {}
        for tid in tids:
            state = read_thread(self.proc, tid)
            if state is None:
                continue
            out[classify(state, self._last.get(tid))] += 1
            seen[tid] = state
        self._last = seen
        return out
