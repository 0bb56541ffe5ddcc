"""The live view: one line per rank, one per model, one for the totals; redrawn in place on a terminal, printed as
plain lines now and then otherwise. The server's own output (when watch started it) passes through above it."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from ckptprof.bootlog.bars import bar_kind
from ckptprof.bootlog.report import ProgressReport
from ckptprof.units import human_bytes
from ckptprof.watch.gpu import GpuTracker
from ckptprof.watch.record import RankTrack, WatchRecord
from ckptprof.watch.residency import ModelTrack

PLAIN_EVERY_S = 5.0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{human_bytes(int(value))}/s"


def rank_line(r: RankTrack) -> str:
    last = r.last
    cpu_rate = None
    if len(r.samples) >= 2:
        a, b = r.samples[-2], r.samples[-1]
        if b.at > a.at:
            cpu_rate = max(0.0, (b.user_s + b.system_s - a.user_s - a.system_s) / (b.at - a.at))
    read = "-" if last.read_bytes is None else human_bytes(last.read_bytes)
    status = "gone" if r.gone_s is not None else last.state
    return (
        f"  {r.label:<8} pid {r.rank.pid:<7} {status:<10} read {read:>9} ({_rate(r.rate('read_bytes')):>11})"
        f"  syscr {last.syscr if last.syscr is not None else '-'}  majflt {last.major_faults}"
        f"  cpu {'-' if cpu_rate is None else f'{100 * cpu_rate:.0f}%'}"
        f"  rss {human_bytes(last.rss_bytes)}  threads {last.threads}"
        + (f"  in {r.stacks.last}" if r.stacks is not None and r.stacks.last else "")
        + (
            f"  stacks {stack_shares_text(r.stacks.shares())}"
            if r.stacks is not None and r.stacks.shares()
            else ""
        )
    )


def stack_shares_text(shares: dict[str, float]) -> str:
    """``read 60% deserialize 30% copy 10%``: the classified py-spy stacks' shares, largest first."""
    return " ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]))


def model_line(m: ModelTrack, bars: Sequence[ProgressReport] = (), only_model: bool = False) -> str:
    if m.problem and not m.shards:
        return f"  {m.role}: {m.problem}"
    full = sum(1 for s in m.shards if s.bytes and s.resident >= s.bytes)
    partly = sum(1 for s in m.shards if 0 < s.resident < s.bytes)
    pct = 100.0 * m.resident_bytes / m.total_bytes if m.total_bytes else 100.0
    return (
        f"  {m.role} {m.path}: {len(m.shards)} shards, {full} in page cache, {partly} partly, "
        f"{len(m.shards) - full - partly} not; resident {pct:.0f}% of {human_bytes(m.total_bytes)}; "
        f"{model_progress(m, bars, only_model)}"
    )


def load_bar(role: str, bars: Sequence[ProgressReport], only_model: bool) -> ProgressReport | None:
    """The log's last weight-loading bar for the model ``role``: one that names it, or, where the server loads one
    model, one that names none (the engines name the draft's bars only when there is a draft)."""
    for bar in reversed(bars):
        kind = bar_kind(bar.desc)
        if kind is None or kind.phase != "load-weights" or bar.total <= 0:
            continue
        if bar.model == role or (bar.model is None and only_model):
            return bar
    return None


def model_progress(m: ModelTrack, bars: Sequence[ProgressReport] = (), only_model: bool = False) -> str:
    """How far the server is through loading the model, and what says so. The log's bar counts what the server
    itself reports (shards, on rank 0); without one, page-cache residency counts bytes brought in since watch began
    - a lower bound on a cold load, and no measure at all of a load whose bytes were cached before it began (the
    ranks then read nothing from storage), which is said instead of a figure."""
    bar = load_bar(m.role, bars, only_model)
    if bar is not None:
        eta = f", {bar.eta_s} s left by its bar" if bar.eta_s is not None and bar.done < bar.total else ""
        return f"load {100 * bar.done / bar.total:.0f}% by the log ({bar.done}/{bar.total} shards{eta})"
    cold = sum(max(0, s.bytes - s.resident_at_start) for s in m.shards)
    if not m.reliable:
        return "load progress unknown: the page cache of these files is not visible to this user"
    if cold <= 0:
        return "load progress unknown: in page cache before watch began, and the log shows no bar"
    came = sum(min(max(0, s.resident - s.resident_at_start), s.bytes - s.resident_at_start) for s in m.shards)
    return (
        f"load >= {100 * came / cold:.0f}% by page cache ({human_bytes(came)} of the "
        f"{human_bytes(cold)} not cached when watch began)"
    )


def totals_line(record: WatchRecord) -> str:
    ckpt = record.checkpoint_bytes()
    total = record.storage_bytes_total()
    if not record.ranks:
        return "  storage reads: no rank process seen yet"
    if total is None:
        return "  storage reads: unknown (/proc/PID/io not readable)"
    amp = f" = {total / ckpt:.2f}x the checkpoint" if ckpt else ""
    return f"  ranks read {human_bytes(total)} from storage since they started{amp}"


def header_line(record: WatchRecord, elapsed_s: float, log_words: str | None) -> str:
    engine = {"sglang": "SGLang", "vllm": "vLLM"}.get(record.engine or "", "server")
    ranks = f"{len(record.ranks)} rank process{'es' if len(record.ranks) != 1 else ''}"
    log = f"; log: {log_words}" if log_words else ""
    return f"ckptprof watch: {engine} pid {record.pid}, {elapsed_s:.1f} s, {ranks}{log}"


def lines(
    record: WatchRecord, elapsed_s: float, log_words: str | None, bars: Sequence[ProgressReport] = ()
) -> list[str]:
    """The view; ``bars`` are the log's progress bars so far (the boot-log reader's), for each model's progress."""
    out = [header_line(record, elapsed_s, log_words)]
    out += [rank_line(r) for r in record.ranks]
    if not record.ranks:
        out.append("  (no rank process yet)")
    only_model = len(record.models) == 1
    out += [model_line(m, bars, only_model) for m in record.models]
    out.append(totals_line(record))
    if record.gpu is not None and record.gpu.devices:
        out.append(gpu_line(record.gpu))
    return out


def gpu_line(gpu: GpuTracker) -> str:
    """``  GPU memory used: 0 12.30 GB, 1 12.10 GB of 143.77 GB each`` (NVML's indices)."""
    devices = sorted(gpu.devices.values(), key=lambda d: d.index)
    totals = {d.total_bytes for d in devices}
    each = f" of {human_bytes(devices[0].total_bytes)} each" if len(totals) == 1 else ""
    used = ", ".join(
        f"{d.index} {human_bytes(d.used_at_end)}" + ("" if each else f"/{human_bytes(d.total_bytes)}")
        for d in devices
    )
    return f"  GPU memory used: {used}{each}"


class Screen:
    """Writes the view to ``stream`` and the server's output through, one writer at a time."""

    def __init__(
        self,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
        plain_every_s: float = PLAIN_EVERY_S,
    ) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.lock = threading.Lock()
        self._clock = clock
        self._plain_every_s = plain_every_s
        self._last_plain = float("-inf")
        self._drawn = 0  # lines of the view on screen now (terminal only)
        self._last: list[str] = []

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
            self._drawn = 0

    def draw(self, view: list[str], force: bool = False) -> None:
        with self.lock:
            self._last = view
            if self.tty:
                width = max(20, shutil.get_terminal_size().columns - 1)
                self._erase()
                self.stream.write("".join(line[:width] + "\n" for line in view))
                self._drawn = len(view)
            elif force or self._clock() - self._last_plain >= self._plain_every_s:
                self._last_plain = self._clock()
                self.stream.write("".join(line + "\n" for line in view))
            self.stream.flush()

    def passthrough(self, stream: TextIO, text: str) -> None:
        """The server's output: above the view on a terminal (the view is drawn again below it)."""
        with self.lock:
            if self.tty and stream.isatty():
                self._erase()
                stream.write(text)
                stream.flush()
                self.stream.write("".join(line + "\n" for line in self._last))
                self._drawn = len(self._last)
            else:
                stream.write(text)
            stream.flush()
            self.stream.flush()

    def finish(self) -> None:
        """Leave the last view on screen as it is."""
        with self.lock:
            self._drawn = 0
