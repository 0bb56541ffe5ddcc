"""What a process's threads are doing, sampled from the kernel, so a load can be attributed without being changed.

The decomposed replay times read, deserialise and copy one after the other, which is not what SGLang does: its copies
overlap the page-fault I/O of the next chunk. To say where SGLang's own wall goes, the loading processes are left
alone and observed instead: a thread of this (separate) process reads ``/proc/<pid>/task/<tid>/stat`` and ``wchan``
of every thread of each watched process, about a thousand times a second, and classifies each thread at each tick:

- ``storage``: in uninterruptible sleep (state D: waiting for a page or a read to come from the device, the wait
  channel says which), or running with a new major fault since the last tick (a fault that went to storage);
- ``page_cache``: running with new minor faults and no major one (mapping pages that were already in memory);
- ``cpu``: running with no new fault (deserialisation, host copies, Python);
- ``waiting``: sleeping interruptibly (a lock, a queue, a CUDA synchronisation).

A process's state at a tick is the most telling of its threads' (storage, then page cache, then cpu, then waiting),
and its shares are the fractions of its ticks in each: the shares of its wall, sampled, not summed phase times.
A copy out of a mapping faults at every tick, so the running ticks are then split between page cache and cpu by
the process's kernel and user time over the window (faulting pages in and reading them is kernel time, deserialising
and copying in user space is user time) - the kernel's 10 ms accounting, good over a load, not over one tick.
A window in which the process took no major fault and read nothing from a block device fetched nothing from
storage: its D states were waits on pages already in memory (ranks faulting the same cached page wait on its lock in
the same kernel function as on a read), so they count as page cache.

That rule is blunt: one fault anywhere in the window turns it off. Given the block devices under the checkpoint,
the sampler also asks them at each tick: a thread in state D while none of them has a request in flight, and none
had one since the previous tick (its io_ticks did not move), is not waiting for storage; it counts as page cache.
A network or FUSE file system has no block device to ask, and keeps the window rule alone.

The faithful pass also keeps the span of each of its copies into the parameters (the recorder's ``copy_began`` /
``copy_ended``, clock reads in the rank); given them, a window counts the ticks inside a copy apart, with the user
and kernel time counted at those ticks, so that running inside SGLang's copies (staging, DMA) is told from running
outside them (deserialisation), each split between page cache and cpu by its own kernel and user time.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.checkpoint import diskstats

# The classes, most telling first: a process is in the first one any of its threads is in.
CLASSES = ("storage", "page_cache", "cpu", "waiting")
DEFAULT_HZ = 1000.0
# The share of one core the sampler may use: it slows down on a host with many threads to watch rather than compete.
MAX_DUTY = 0.25
# stat's fields after the command name (which may hold spaces and parentheses: split after its last ')').
_STATE, _MINFLT, _MAJFLT, _UTIME, _STIME = 0, 7, 9, 11, 12


@dataclass(frozen=True)
class ThreadState:
    """One thread at one tick: its scheduler state, its wait channel and its fault counters."""

    tid: int
    state: str  # R running, S sleeping, D uninterruptible (I/O), I idle kernel thread, ...
    wchan: str  # the kernel function it sleeps in ("" when running or unknown)
    minflt: int
    majflt: int
    utime: int = 0  # clock ticks in user space so far
    stime: int = 0  # clock ticks in the kernel so far


def read_thread(proc: Path, tid: int) -> ThreadState | None:
    """The thread's state now; None when it has exited (or cannot be read)."""
    task = proc / "task" / str(tid)
    try:
        stat = (task / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        wchan = (task / "wchan").read_text().strip()
    except OSError:
        wchan = ""
    return ThreadState(
        tid=tid,
        state=fields[_STATE],
        wchan="" if wchan == "0" else wchan,
        minflt=int(fields[_MINFLT]),
        majflt=int(fields[_MAJFLT]),
        utime=int(fields[_UTIME]),
        stime=int(fields[_STIME]),
    )


def classify(now: ThreadState, before: ThreadState | None, storage_idle: bool = False) -> str:
    """The class of one thread at one tick, from its state and its faults since the previous tick.

    ``storage_idle``: the block devices under the checkpoint had no request in flight at this tick nor since the
    previous one, so a thread in state D waits on something in memory (a page another thread is faulting in)."""
    if now.state == "D":
        return "page_cache" if storage_idle else "storage"
    if now.state == "R":
        if before is not None and now.majflt > before.majflt:
            return "storage"
        if before is not None and now.minflt > before.minflt:
            return "page_cache"
        return "cpu"
    return "waiting"


def process_class(thread_classes: Iterable[str]) -> str:
    """The most telling class among a process's threads at one tick."""
    present = set(thread_classes)
    return next((c for c in CLASSES if c in present), "waiting")


@dataclass(frozen=True)
class Tick:
    """A process at one sample: when (time.monotonic()), its class, and its threads' user and kernel time so far."""

    at: float
    cls: str
    user: int = 0
    system: int = 0
    majflt: int = 0  # major faults of its threads so far
    read_bytes: int | None = (
        None  # bytes it read from block devices so far (/proc/<pid>/io); None: unreadable
    )


def merge_spans(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as sorted, disjoint (start, end) pairs (copies from several threads may overlap)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def storage_as_page_cache(shares: dict[str, float]) -> dict[str, float]:
    """``shares`` with the storage share counted as page cache: for a window that fetched nothing from storage, whose
    waits in state D were on pages already in memory."""
    return {**shares, "page_cache": shares["page_cache"] + shares["storage"], "storage": 0.0}


def _inside(spans: list[tuple[float, float]], starts: list[float], at: float) -> bool:
    i = bisect.bisect_right(starts, at) - 1
    return i >= 0 and at <= spans[i][1]


@dataclass
class Window:
    """What the ticks of one or more windows add up to: ticks per class, and the user and kernel time spent; with
    the spans of the load's copies, the same for the ticks inside them."""

    counts: Counter[str] = field(default_factory=Counter)
    user: int = 0
    system: int = 0
    majflt: int = 0
    read_bytes: int = 0
    # Whether every window spanned two ticks or more with readable I/O counters: only then does "fetched nothing"
    # mean something.
    fetch_known: bool = True
    # The ticks inside a copy, and the user and kernel time counted between a tick and the one before it when the
    # tick is inside a copy (the kernel's 10 ms accounting lands where the ticks that saw it were).
    copy_counts: Counter[str] = field(default_factory=Counter)
    copy_user: int = 0
    copy_system: int = 0
    copies_known: bool = False

    def add(self, ticks: Sequence[Tick], copies: Sequence[tuple[float, float]] | None = None) -> None:
        """One window's ticks; ``copies``: the (start, end) monotonic spans of the copies made in it, when known."""
        self.counts.update(t.cls for t in ticks)
        if copies is not None:
            self._add_copies(ticks, merge_spans(copies))
        if len(ticks) < 2:
            self.fetch_known = self.fetch_known and not ticks
            return
        first, last = ticks[0], ticks[-1]
        self.user += max(0, last.user - first.user)
        self.system += max(0, last.system - first.system)
        self.majflt += max(0, last.majflt - first.majflt)
        if first.read_bytes is None or last.read_bytes is None:
            self.fetch_known = False
        else:
            self.read_bytes += max(0, last.read_bytes - first.read_bytes)

    def _add_copies(self, ticks: Sequence[Tick], spans: list[tuple[float, float]]) -> None:
        self.copies_known = True
        starts = [start for start, _ in spans]
        before: Tick | None = None
        for tick in ticks:
            if _inside(spans, starts, tick.at):
                self.copy_counts[tick.cls] += 1
                if before is not None:
                    self.copy_user += max(0, tick.user - before.user)
                    self.copy_system += max(0, tick.system - before.system)
            before = tick

    def _split(self, counts: Counter[str], user: int, system: int, total: int) -> dict[str, float]:
        """``counts`` as fractions of ``total`` ticks, their running ticks split by ``user`` vs ``system`` time (the
        whole window's when these ticks saw none)."""
        out = {c: counts[c] / total for c in CLASSES}
        if user + system <= 0:
            user, system = self.user, self.system
        if user + system > 0:
            running = out["page_cache"] + out["cpu"]
            out["page_cache"] = running * system / (user + system)
            out["cpu"] = running - out["page_cache"]
        return out

    def _fetched_nothing(self, out: dict[str, float]) -> dict[str, float]:
        if self.fetch_known and self.majflt == 0 and self.read_bytes == 0:
            return storage_as_page_cache(out)
        return out

    def shares(self) -> dict[str, float]:
        """Fractions of the wall in each class; the running ticks split by kernel vs user time when it was counted
        (inside the copies and outside them each by its own, when the copies are known)."""
        total = sum(self.counts.values())
        if not total:
            return dict.fromkeys(CLASSES, 0.0)
        inside = self._split(self.copy_counts, self.copy_user, self.copy_system, total)
        outside = self._split(
            self.counts - self.copy_counts,
            max(0, self.user - self.copy_user),
            max(0, self.system - self.copy_system),
            total,
        )
        return self._fetched_nothing({c: inside[c] + outside[c] for c in CLASSES})

    def copy_shares(self) -> dict[str, float] | None:
        """The part of each share that fell inside the copies (fractions of the same wall); None when the copies
        were not known."""
        total = sum(self.counts.values())
        if not self.copies_known or not total:
            return None
        return self._fetched_nothing(self._split(self.copy_counts, self.copy_user, self.copy_system, total))


@dataclass
class ProcessSamples:
    """What the sampler saw of one process: its ticks, and the wait channels of its threads' D states."""

    pid: int
    ticks: list[Tick] = field(default_factory=list)
    wchans: Counter[str] = field(default_factory=Counter)

    def between(self, start: float | None = None, end: float | None = None) -> list[Tick]:
        """The ticks between ``start`` and ``end`` (monotonic seconds)."""
        return [t for t in self.ticks if (start is None or t.at >= start) and (end is None or t.at <= end)]

    def shares(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """The shares of the wall between ``start`` and ``end`` (monotonic seconds) in each class."""
        window = Window()
        window.add(self.between(start, end))
        return window.shares()


class KernelSampler:
    """Samples every thread of ``pids`` at about ``hz`` until ``stop()``; a context manager."""

    def __init__(
        self,
        pids: Sequence[int],
        hz: float = DEFAULT_HZ,
        proc_root: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
        disks: Sequence[str] = (),
    ) -> None:
        """``disks``: the /proc/diskstats names of the block devices under the checkpoint (diskstats.device_for), asked
        at each tick whether storage was busy at all; none for a network or FUSE file system."""
        self.interval = 1.0 / hz
        self.disks = tuple(dict.fromkeys(disks))
        self._disk_last: dict[str, diskstats.DiskSample] = {}
        # Ticks at which the disks were asked, and at how many of them they were idle.
        self.disk_ticks = 0
        self.disk_idle_ticks = 0
        self.samples = {pid: ProcessSamples(pid) for pid in pids}
        self._proc_root = proc_root
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ckptprof-sampler", daemon=True)
        self._last: dict[tuple[int, int], ThreadState] = {}
        self._lock = threading.Lock()

    def watch(self, pid: int) -> None:
        """Sample ``pid`` too from the next tick on (a rank process that has just started)."""
        with self._lock:
            self.samples.setdefault(pid, ProcessSamples(pid))

    def watch_rank(self, _rank: int, pid: int) -> None:
        """``watch`` as the replay's rank-start hook calls it: (rank, pid)."""
        self.watch(pid)

    def __enter__(self) -> KernelSampler:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[int, ProcessSamples]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.samples

    def _storage_idle(self) -> bool:
        """Whether no disk under the checkpoint has a request in flight now or had one since the last tick."""
        if not self.disks:
            return False
        try:
            text = (self._proc_root / "diskstats").read_text()
        except OSError:
            return False
        idle = True
        for disk in self.disks:
            now = diskstats.sample(disk, text)
            if now is None:
                return False  # a device that cannot be read might be the busy one
            before = self._disk_last.get(disk)
            self._disk_last[disk] = now
            if now.in_flight > 0 or before is None or now.io_ticks_ms > before.io_ticks_ms:
                idle = False
        self.disk_ticks += 1
        self.disk_idle_ticks += idle
        return idle

    def tick(self) -> None:
        """One sample of every watched process (the loop calls this; tests may too)."""
        now = self._clock()
        storage_idle = self._storage_idle()
        with self._lock:
            watched = list(self.samples.items())
        for pid, seen in watched:
            proc = self._proc_root / str(pid)
            try:
                tids = [int(t) for t in os.listdir(proc / "task")]
            except OSError:
                continue  # the process has exited
            classes = []
            user = system = majflt = 0
            for tid in tids:
                state = read_thread(proc, tid)
                if state is None:
                    continue
                cls = classify(state, self._last.get((pid, tid)), storage_idle)
                self._last[(pid, tid)] = state
                classes.append(cls)
                user, system, majflt = user + state.utime, system + state.stime, majflt + state.majflt
                if state.state == "D" and state.wchan:
                    seen.wchans[state.wchan] += 1
            if classes:
                seen.ticks.append(Tick(now, process_class(classes), user, system, majflt, _read_bytes(proc)))

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            self.tick()
            cost = time.perf_counter() - began
            # At most MAX_DUTY of one core: on a small host a sampler reading many threads' files would otherwise
            # take the CPU from the very load it watches (whose threads then show as runnable, "cpu").
            self._stop.wait(max(self.interval - cost, cost * (1 - MAX_DUTY) / MAX_DUTY))


def _read_bytes(proc: Path) -> int | None:
    """The process's bytes read from block devices so far (/proc/<pid>/io); None when it cannot be read."""
    try:
        for line in (proc / "io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
