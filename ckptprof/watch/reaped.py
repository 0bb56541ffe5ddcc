"""A rank's last reads, recovered from its parent when the rank ends between two samples.

A rank that reads and exits inside one sample interval takes that interval's reads with it: once its parent reaps
it, ``/proc/PID/io`` is gone. But the reap itself adds the child's whole counters (its own, its dead threads' and
its own reaped children's) to the parent's signal struct, which the parent's ``/proc/PID/io`` includes
(kernel/exit.c, wait_task_zombie; checked on this machine's 6.18 kernel: a parent's ``read_bytes`` grew by its
child's 8 MiB at ``waitpid``). So watch follows each rank's parent too, and splits the parent's growth in an
interval into what its own threads read (``/proc/PID/task/TID/io``, each thread's own) and the rest; the rest, less
what watch last saw of the children that ended in that interval, is what those children read after watch's last
look at them. It is credited to them, never more than it is.

Until the reap a child is a zombie whose ``/proc/PID/io`` still holds its final counters: watch reads them then
(counters.ProcessReader), and a rank seen that way has nothing to recover.

Windows: the parent is read before the ranks at each sample, and again after them when a child ended; a window runs
from one such read to a later one, and holds the reaps of the children that ended in it and of no other. So a child
is an ender of a window only once it was seen gone before the window's closing read, and every child left for later
windows must be seen still there after that read: a child read alive (or seen a zombie) earlier in the sample may be
reaped before the closing read, and its whole count would then land in this window and be handed to the others that
ended in it (a rank seen a zombie and reaped just after, beside a sibling that ended unseen, gave the sibling the
zombie's whole count). Such a child is looked for once more after the closing read: gone, it joins the enders and the
parent is read again, until every child left is seen after the last read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptprof.watch.counters import ParentCounters, ParentReader, ProcCounters, is_zombie, read_io

SPLIT_ALONE = "alone"  # the only child of that parent that ended in the interval
SPLIT_RATE = (
    "by last read rate"  # several, each reading at its last look: in proportion to its last interval's reads
)
SPLIT_EVEN = "evenly"  # several, not all seen reading: the figures per rank are a guess, their sum is not


@dataclass(frozen=True)
class Recovered:
    """What a rank read after watch's last look at it, recovered from its parent's /proc/PID/io at its reap."""

    parent_pid: int
    read_bytes: int
    syscr: int
    split: str  # SPLIT_ALONE | SPLIT_RATE | SPLIT_EVEN
    ended_with: tuple[int, ...]  # the parent's other children that ended in the same interval
    parent_unexplained_read_bytes: int  # the parent's growth in the interval beyond its own threads' reads
    from_s: float  # the interval, seconds after watch began
    to_s: float


@dataclass(frozen=True)
class Ender:
    """A child of the parent that ended in the interval, as watch last saw it."""

    pid: int
    read_bytes: int | None  # at the last look
    syscr: int | None
    read_rate: (
        int | None
    )  # read_bytes growth over its last sampled interval (None: seen once): weights the split
    syscr_rate: int | None
    final: bool  # the last look was at its zombie: its counters were final, nothing to recover


def _share(pool: int, weights: Sequence[int | None]) -> tuple[list[int], bool]:
    """``pool`` split in proportion to ``weights``, in whole units that add up to ``pool`` exactly; and whether the
    weights were used. By weight only when every one is positive: a child not reading at its last look (or seen
    once, its rate never measured) may still have read everything after it (on the 2-core VM a faithful-pass rank
    idle at its last look read 9.3 MB after it), and a weight of 0 would hand it nothing."""
    n = len(weights)
    if pool <= 0 or n == 0:
        return [0] * n, False
    by_weight = all(w is not None and w > 0 for w in weights)
    ws = [w or 0 for w in weights] if by_weight else [1] * n
    total = sum(ws)
    out = [pool * w // total for w in ws]
    out[max(range(n), key=lambda i: ws[i])] += pool - sum(out)
    return out, by_weight


def split_recovered(
    unexplained_read_bytes: int, unexplained_syscr: int, enders: Sequence[Ender]
) -> dict[int, tuple[int, int, str]]:
    """Per child that ended in an interval and was not seen final: (read_bytes, syscr, how it was split).

    The parent's unexplained growth holds each ended child's whole count; what watch had already seen of them is
    taken out first, and only the rest is shared among those not seen final. Nothing when that rest is not
    positive: a parent that read more itself than its threads show cannot make a child read more."""
    open_ = [e for e in enders if not e.final]
    if not open_:
        return {}
    pool_r = unexplained_read_bytes - sum(e.read_bytes or 0 for e in enders)
    pool_c = unexplained_syscr - sum(e.syscr or 0 for e in enders)
    reads, by_rate = _share(pool_r, [e.read_rate for e in open_])
    calls, _ = _share(pool_c, [e.syscr_rate for e in open_])
    how = SPLIT_ALONE if len(open_) == 1 else SPLIT_RATE if by_rate else SPLIT_EVEN
    return {e.pid: (r, c, how) for e, r, c in zip(open_, reads, calls, strict=True)}


@dataclass
class _Child:
    rank: bool
    read_bytes: int | None = None
    syscr: int | None = None
    read_rate: int | None = None
    syscr_rate: int | None = None
    final: bool = False

    def update(self, read_bytes: int | None, syscr: int | None, final: bool = False) -> None:
        if read_bytes is not None and self.read_bytes is not None:
            self.read_rate = read_bytes - self.read_bytes
        if syscr is not None and self.syscr is not None:
            self.syscr_rate = syscr - self.syscr
        self.read_bytes, self.syscr, self.final = read_bytes, syscr, final

    def ender(self, pid: int) -> Ender:
        return Ender(pid, self.read_bytes, self.syscr, self.read_rate, self.syscr_rate, self.final)


class ParentWatch:
    """One rank parent's ledger: its children as last seen, and its unexplained reading at the window's start.

    Per sample: ``before()`` (the parent, then its other children), the watcher reads the ranks and reports each
    through ``rank_seen`` / ``rank_gone``, then ``after()`` credits the ranks that ended."""

    def __init__(self, pid: int, proc_root: Path = Path("/proc")) -> None:
        self.pid = pid
        self.proc_root = proc_root
        self.reader = ParentReader(pid, proc_root)
        self.children: dict[int, _Child] = {}
        self.base: ParentCounters | None = None  # the window's start
        self._before: ParentCounters | None = None
        self._ended: list[int] = []

    def add_rank(self, pid: int, counters: ProcCounters) -> None:
        child = self.children.setdefault(pid, _Child(rank=True))
        child.rank = True
        child.update(counters.read_bytes, counters.syscr, counters.exited)

    def has_ranks(self) -> bool:
        return any(c.rank for c in self.children.values())

    def before(self, at: float) -> None:
        """The parent's counters before the ranks are read; its other children's last counts."""
        self._ended = []
        self._before = self.reader.read(at)
        if self._before is None:
            return
        if self.base is None:
            self.base = self._before
        for pid in self._before.children:
            self.children.setdefault(pid, _Child(rank=False))
        for pid, child in list(self.children.items()):
            if child.rank and not child.final:
                continue  # the watcher reads it
            proc = self.proc_root / str(pid)
            if child.rank:  # a rank seen as a zombie: only its reap is waited for
                if is_zombie(proc) is None:
                    self._ended.append(pid)
                continue
            io = read_io(proc)
            if io is None:
                self._ended.append(pid)
            else:
                child.update(io.get("read_bytes"), io.get("syscr"))

    def rank_seen(self, pid: int, counters: ProcCounters) -> None:
        self.add_rank(pid, counters)

    def rank_gone(self, pid: int) -> None:
        if pid in self.children:
            self._ended.append(pid)

    def after(self, at: float, t0: float) -> dict[int, Recovered]:
        """Credit the ranks that ended since the window began (``at`` and ``t0``, watch's start, on the same
        clock); the next window begins here."""
        if self._before is None or self.base is None:
            for pid in self._ended:
                self.children.pop(pid, None)
            self._ended = []
            return {}
        if not self._ended:
            self.base = self._before
            return {}
        now = self.reader.read(at)
        ended = {pid: self.children.pop(pid) for pid in dict.fromkeys(self._ended)}
        self._ended = []
        while now is not None and (reaped := self._reaped_since_seen()):
            # Reaped between watch's look at them and the read above, or just after it: either way before a read
            # made now, which then holds their counts with the others'.
            ended.update((pid, self.children.pop(pid)) for pid in reaped)
            now = self.reader.read(at)
        if now is None:  # the parent is gone or unreadable: nothing to recover from
            self.base = None
            return {}
        base, self.base = self.base, now
        grew_r = now.unexplained_read_bytes - base.unexplained_read_bytes
        grew_c = now.unexplained_syscr - base.unexplained_syscr
        enders = [child.ender(pid) for pid, child in ended.items()]
        shares = split_recovered(grew_r, grew_c, enders)
        ranks = {pid for pid, child in ended.items() if child.rank}
        from_s, to_s = round(base.at - t0, 3), round(now.at - t0, 3)
        out: dict[int, Recovered] = {}
        for pid, (r, c, how) in shares.items():
            if pid not in ranks or (r <= 0 and c <= 0):
                continue
            out[pid] = Recovered(
                parent_pid=self.pid,
                read_bytes=r,
                syscr=c,
                split=how,
                ended_with=tuple(e.pid for e in enders if e.pid != pid),
                parent_unexplained_read_bytes=max(0, grew_r),
                from_s=from_s,
                to_s=to_s,
            )
        return out

    def _reaped_since_seen(self) -> list[int]:
        """The children still counted as alive or unreaped whose /proc entry is gone now: reaped, so their counts
        are in the parent's already (the kernel adds them before it removes the entry)."""
        return [pid for pid in self.children if is_zombie(self.proc_root / str(pid)) is None]
