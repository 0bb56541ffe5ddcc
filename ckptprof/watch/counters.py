"""One rank process's kernel counters at one instant, read from /proc without stopping it (no ptrace).

``/proc/PID/stat`` (faults, CPU time, threads, RSS) is readable for any process; ``/proc/PID/io`` (bytes read
from storage, read calls) only for one's own processes or as root, so it may come back None. What the threads
are doing is classified by the kernel sampler's own rule (ckptprof.profiling.sampler: storage, page cache, cpu,
waiting), from each thread's state and faults since the previous sample.
"""

from __future__ import annotations

import contextlib
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
    # Read after the process exited, before its parent reaped it (a zombie): these are its final counters, the
    # kernel keeps /proc/PID/io (its own and its dead threads' reads) until the reap.
    exited: bool = False


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
        """The counters now; None once the process is gone (reaped). A zombie's are its final ones (``exited``):
        on Linux its /proc/PID/io stays readable, whole, until its parent reaps it (checked on 6.18)."""
        try:
            stat = (self.proc / "stat").read_text()
        except OSError:
            return None
        zombie = stat[stat.rindex(")") + 2 :].startswith("Z")
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
        if self.threads and not zombie:  # a zombie's one thread is only waiting to be reaped
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
            exited=zombie,
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


def read_io(proc: Path) -> dict[str, int] | None:
    """``/proc/PID/io`` (or a thread's ``/proc/PID/task/TID/io``) as numbers; None when gone or unreadable."""
    try:
        return parse_io((proc / "io").read_text())
    except OSError:
        return None


def is_zombie(proc: Path) -> bool | None:
    """True: exited, not yet reaped; False: running; None: gone (reaped) or unreadable."""
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].startswith("Z")


@dataclass(frozen=True)
class ParentCounters:
    """A rank's parent's reading at one instant, split into what its own threads read and the rest.

    ``/proc/PID/io`` of a process is its live threads' counters plus its signal struct's: the threads that ended
    and, when it reaps a child (wait), that child's whole counters (kernel/exit.c, wait_task_zombie). Each thread's
    own ``/proc/PID/task/TID/io`` holds only its own reads. So what the whole grew by beyond its threads' own
    (``unexplained_*``, cumulative) is reaped children's reading, plus the last reads of threads that ended between
    two looks: the most a child reaped in between can be credited, never more.
    """

    at: float
    read_bytes: int
    syscr: int
    own_read_bytes: int  # every thread of the parent ever seen, at its highest count
    own_syscr: int
    children: frozenset[int]  # its child processes now (/proc/PID/task/*/children)

    @property
    def unexplained_read_bytes(self) -> int:
        return self.read_bytes - self.own_read_bytes

    @property
    def unexplained_syscr(self) -> int:
        return self.syscr - self.own_syscr


class ParentReader:
    """Reads a rank's parent's /proc/PID/io whole and per thread, and keeps the ledger of its threads' own reads
    (a thread that ended keeps its last count; a thread id reused by a new thread starts a new entry)."""

    def __init__(self, pid: int, proc_root: Path = Path("/proc")) -> None:
        self.pid = pid
        self.proc = proc_root / str(pid)
        self._threads: dict[int, tuple[int, int]] = {}  # tid -> (read_bytes, syscr) at its last look
        self._retired = (0, 0)  # ended threads' last counts
        self._last: ParentCounters | None = None

    def read(self, at: float) -> ParentCounters | None:
        """None once the parent is gone or its /proc/PID/io is not readable (another user's process)."""
        # The whole first, then the threads: a thread's reads between the two count as its own, never as a
        # reaped child's (the error leans to crediting too little).
        whole = read_io(self.proc)
        if whole is None or "read_bytes" not in whole or "syscr" not in whole:
            return None
        last = self._last
        if last is not None and (whole["read_bytes"], whole["syscr"]) == (last.read_bytes, last.syscr):
            # The whole only grows (a thread's end moves its count, a reap adds): unchanged, nothing was read by a
            # thread nor reaped, and the ledger stands. The threads (a launcher has dozens, ~25 us each on the 2-core
            # VM) are read only when it moved.
            self._last = ParentCounters(
                at, last.read_bytes, last.syscr, last.own_read_bytes, last.own_syscr, last.children
            )
            return self._last
        tasks = f"{self.proc}/task"
        try:
            tids = [int(t) for t in os.listdir(tasks)]
        except OSError:
            return None
        seen: dict[int, tuple[int, int]] = {}
        children: set[int] = set()
        for tid in tids:
            try:  # plain open(), not pathlib: this loop is most of watch's cost for a parent with many threads
                with open(f"{tasks}/{tid}/io") as fh:
                    io = parse_io(fh.read())
            except OSError:
                continue  # ended since the listing: its last count is retired below
            seen[tid] = (io.get("read_bytes", 0), io.get("syscr", 0))
            with (
                contextlib.suppress(
                    OSError, ValueError
                ),  # no CONFIG_PROC_CHILDREN: its other children go unseen
                open(f"{tasks}/{tid}/children") as fh,
            ):
                children.update(int(c) for c in fh.read().split())
        retired_r, retired_c = self._retired
        for tid, (r, c) in self._threads.items():
            now = seen.get(tid)
            if now is None or now[0] < r or now[1] < c:  # ended, or its id now names a new thread
                retired_r, retired_c = retired_r + r, retired_c + c
        self._retired = (retired_r, retired_c)
        self._threads = seen
        self._last = ParentCounters(
            at=at,
            read_bytes=whole["read_bytes"],
            syscr=whole["syscr"],
            own_read_bytes=retired_r + sum(r for r, _ in seen.values()),
            own_syscr=retired_c + sum(c for _, c in seen.values()),
            children=frozenset(children),
        )
        return self._last
