"""The watch loop: find the rank processes, sample their counters and the shards' residency at a fixed
interval, feed the log to the boot-log reader, redraw the view, and stop when the server is gone, the log says it
is ready, the time is up or the user interrupts. It only reads /proc and the page cache: the server is never
stopped, traced or signalled (except, when watch started it, to pass on the user's Ctrl-C or SIGTERM)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

import psutil

from ckptprof.bootlog.report import ProgressReport
from ckptprof.units import human_bytes
from ckptprof.watch import procs
from ckptprof.watch.cmdline import ModelArg, model_args
from ckptprof.watch.counters import ProcessReader
from ckptprof.watch.gpu import GpuTracker, choose
from ckptprof.watch.logfeed import FileFollower, LogFeed
from ckptprof.watch.reaped import ParentWatch, Recovered
from ckptprof.watch.record import RankTrack, WatchRecord
from ckptprof.watch.residency import ResidencyTracker
from ckptprof.watch.stacks import RankStacks, StackSampler
from ckptprof.watch.view import Screen, lines

# 2 Hz: one sample of a rank (stat, io, and every thread's stat and wchan for its state) costs ~0.1-0.3 ms of
# one core for a few dozen threads, and a residency check of a shard tens of microseconds (benchmarks/
# bench_watch.py measures the watched load's slowdown at this rate); a load that takes less than a second is
# seen as its counters before and after.
DEFAULT_INTERVAL_S = 0.5
# Looking for rank processes walks every process of the host (psutil builds the parent map): ~3.5 ms of CPU on the
# 2-core VM, ten times a sample's cost. Until the first rank appears, look every FIRST_RANK_POLL_S (its first
# reads are the boot's); then at every sample while ranks keep appearing (the others take their titles a moment
# later), and every REDISCOVER_S once none has for that long (a restarted worker is still found).
FIRST_RANK_POLL_S = 0.05
REDISCOVER_S = 5.0
EARLY_END_S = 1.0
# A rank that used less CPU than this share of the watch was not loading.
IDLE_CPU_SHARE = 0.05
# How long a server watch started gets to stop after the user's signal is passed on, before it is killed.
CHILD_STOP_GRACE_S = 10.0


@dataclass
class Target:
    pid: int
    create_time: float
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            proc = psutil.Process(self.pid)
            return proc.create_time() == self.create_time and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def attach(pid: int) -> Target:
    try:
        proc = psutil.Process(pid)
        return Target(pid, proc.create_time())
    except psutil.NoSuchProcess:
        raise procs.WatchTargetError(f"pid {pid}: no such process") from None


def start(command: Sequence[str]) -> Target:
    try:
        popen = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise procs.WatchTargetError(f"cannot start {command[0]}: {exc.strerror}") from None
    return Target(popen.pid, psutil.Process(popen.pid).create_time(), popen)


class Watcher:
    def __init__(
        self,
        target: Target,
        model_path: str | None = None,
        log_path: str | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float | None = None,
        screen: Screen | None = None,
        threads: bool = True,
        clock: Callable[[], float] = time.monotonic,
        py_spy: bool = False,
        gpu: GpuTracker | None = None,
    ) -> None:
        self.target = target
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.screen = screen
        self.threads = threads
        self._clock = clock
        self._t0 = clock()
        self._readers: dict[int, ProcessReader] = {}
        self._tracks: dict[int, RankTrack] = {}
        # The ranks' parents, read around each sample: a rank reaped between two samples leaves its last reads in
        # its parent's /proc/PID/io (reaped.py)
        self._parents: dict[int, ParentWatch] = {}
        self._pumps: list[threading.Thread] = []
        self._follower: FileFollower | None = None
        self.residency = ResidencyTracker()
        self.log: LogFeed | None = None
        self._alive: tuple[
            int, ...
        ] = ()  # the ranks being sampled, for the py-spy thread (replaced, never mutated)
        self.stacks = StackSampler(lambda: list(self._alive)) if py_spy else None
        try:
            command = psutil.Process(target.pid).cmdline()
        except psutil.Error:
            command = []
        if target.popen is not None and isinstance(target.popen.args, list):
            command = [str(a) for a in target.popen.args]
        now = dt.datetime.now().astimezone()
        self.record = WatchRecord(
            pid=target.pid,
            command=command,
            started_by_watch=target.popen is not None,
            interval_s=interval_s,
            started_at=now.isoformat(timespec="seconds"),
            launcher_age_s=max(0.0, now.timestamp() - target.create_time),
        )
        self.record.gpu = gpu if gpu is not None else GpuTracker(*choose())
        self._models(command, model_path)
        if log_path is not None:
            self.log = LogFeed(log_path)
            self._follower = FileFollower(Path(log_path), self.log)
            self._follower.start()
        elif target.popen is not None:
            self.log = LogFeed("the server's output")
            self._pump(target.popen.stdout, sys.stdout)
            self._pump(target.popen.stderr, sys.stderr)
        self.record.log_source = None if self.log is None else self.log.source

    # -- set-up --------------------------------------------------------------------------------------------------

    def _models(self, command: list[str], model_path: str | None) -> None:
        found: list[ModelArg] = model_args(command)
        if model_path is not None:
            found = [ModelArg("target", model_path, "watch --model-path")] + [
                m for m in found if m.role != "target"
            ]
        for m in found:
            self.residency.add_model(m.role, m.path, m.flag)
        if not found:
            self.record.notes.append(
                "no checkpoint path on the server's command line (--model-path, --model, vllm serve MODEL): "
                "shard residency is not followed; give watch --model-path DIR"
            )
        self.record.models = self.residency.models

    def _pump(self, pipe: IO[bytes] | None, out: TextIO) -> None:
        if pipe is None:
            return

        def write(data: bytes) -> None:
            text = data.decode("utf-8", "replace")
            if self.screen is not None:
                self.screen.passthrough(out, text)
            else:
                out.write(text)
                out.flush()

        def run() -> None:
            fd = pipe.fileno()
            pending = b""
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                assert self.log is not None
                self.log.feed(data)
                # Whole lines only (a bar frame ends at its carriage return): the view is drawn between them, never
                # inside one.
                pending += data
                cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
                if cut:
                    write(pending[:cut])
                    pending = pending[cut:]
            if pending:
                write(pending + b"\n")

        thread = threading.Thread(target=run, name="ckptprof-watch-output", daemon=True)
        thread.start()
        self._pumps.append(thread)

    # -- the loop ------------------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self._clock() - self._t0

    def check_is_server(self) -> None:
        """Refuse, in one line, a pid under which nothing is a server (attach mode only)."""
        found = procs.discover(self.target.pid)
        if not self.target.alive():
            raise procs.WatchTargetError(
                f"pid {self.target.pid}: the process ended before watch could attach"
            )
        if not found.ranks and found.engine is None:
            raise procs.WatchTargetError(procs.not_a_server_message(found))

    def _discover(self) -> None:
        try:
            found = procs.discover(self.target.pid)
        except procs.WatchTargetError:
            return
        self.record.engine = self.record.engine or found.engine
        for rank in found.ranks:
            if rank.pid in self._tracks or rank.pid in self._readers:
                continue
            reader = ProcessReader(rank.pid, threads=self.threads)
            first = reader.read(self._clock())
            if first is None:
                continue
            track = RankTrack(rank, round(self.elapsed(), 3), first, first, [first], io_note=reader.io_error)
            if first.exited:  # found as a zombie: its final counters, and nothing more to sample
                track.gone_s, track.end_seen = track.first_seen_s, "zombie"
            else:
                self._readers[rank.pid] = reader
            if self.stacks is not None:
                track.stacks = self.stacks.stacks.setdefault(rank.pid, RankStacks())
            self._tracks[rank.pid] = track
            if rank.ppid is not None and reader.io_error is None:
                if rank.ppid not in self._parents:
                    self._parents[rank.ppid] = ParentWatch(rank.ppid)
                    self._parents[rank.ppid].before(self._clock())  # the first window starts here
                self._parents[rank.ppid].add_rank(rank.pid, first)
            self.record.ranks.append(track)
            if reader.io_error and reader.io_error not in self.record.notes:
                self.record.notes.append(reader.io_error)

    def _sample(self) -> None:
        # The parents before the ranks: a rank read below was not reaped yet when its parent was read here
        for watched in self._parents.values():
            watched.before(self._clock())
        for pid, reader in list(self._readers.items()):
            track = self._tracks[pid]
            if len(track.samples) == 1 and self._clock() - track.first.at < FIRST_RANK_POLL_S:
                continue  # read a moment ago, when it was found
            counters = reader.read(self._clock())
            ppid = track.rank.ppid
            parent: ParentWatch | None = None if ppid is None else self._parents.get(ppid)
            if counters is None:
                track.gone_s, track.end_seen = round(self.elapsed(), 3), "reaped"
                del self._readers[pid]
                if parent is not None:
                    parent.rank_gone(pid)
                continue
            track.add(counters)
            if counters.exited:  # a zombie: its final counters (its state "waiting": to be reaped)
                track.gone_s, track.end_seen = round(self.elapsed(), 3), "zombie"
                del self._readers[pid]
            if parent is not None:
                parent.rank_seen(pid, counters)
        # ... and after them, where one ended: its reap is inside the parent's window
        for pp, watched in list(self._parents.items()):
            for pid, recovered in watched.after(self._clock(), self._t0).items():
                self._recovered(self._tracks[pid], recovered)
            if not watched.has_ranks():
                del self._parents[pp]
        self._alive = tuple(self._readers)
        self.residency.sample(self.elapsed())
        if self.record.gpu is not None:
            self.record.gpu.sample(self.elapsed())

    def _recovered(self, track: RankTrack, recovered: Recovered) -> None:
        track.recovered = recovered
        also = (
            f", split {recovered.split} with pid(s) {', '.join(map(str, recovered.ended_with))} that ended in the "
            "same interval"
            if recovered.ended_with
            else ""
        )
        self.record.notes.append(
            f"{track.label} (pid {track.rank.pid}) ended between two samples ({recovered.from_s:.1f}-"
            f"{recovered.to_s:.1f} s): {human_bytes(recovered.read_bytes)} and {recovered.syscr} read calls it made "
            f"after watch's last look were recovered from its parent (pid {recovered.parent_pid}), whose "
            "/proc/PID/io the kernel adds a child's counters to when it reaps it" + also
        )

    def _log_words(self) -> tuple[str | None, str | None, list[ProgressReport]]:
        """(the log's state, a few words on it, its progress bars so far) when there is a log."""
        if self.log is None:
            return None, None, []
        report = self.log.report()
        if not report.phases and report.state == "starting":
            return report.state, None, list(report.progress)
        shown = [f"{b.model + ' ' if b.model else ''}{b.done}/{b.total}" for b in report.progress[-2:]]
        words = report.state + (f" ({', '.join(shown)} shards)" if shown else "")
        return report.state, words, list(report.progress)

    def run(self) -> WatchRecord:
        """Watch until the end; KeyboardInterrupt (Ctrl-C, SIGTERM) ends it too, with end_reason 'interrupted'."""
        self.residency.sample(0.0, first=True)
        if self.record.gpu is not None:
            self.record.gpu.sample(0.0)
        if self.stacks is not None:
            self.stacks.start()
        next_discovery = next_draw = last_new_rank = 0.0
        try:
            while True:
                began = self._clock()
                if self.elapsed() >= next_discovery:
                    known = len(self.record.ranks)
                    self._discover()
                    if len(self.record.ranks) > known:
                        last_new_rank = self.elapsed()
                    # Settled only while some rank lives: once every one is gone, the next ones (ckptprof run's
                    # faithful pass spawns new rank processes, a server restarts its workers) are looked for at
                    # every sample again, or a short pass could start and end between two looks.
                    settled = (
                        bool(self._readers)
                        and self.record.ranks
                        and self.elapsed() - last_new_rank >= REDISCOVER_S
                    )
                    next_discovery = self.elapsed() + (REDISCOVER_S if settled else 0.0)
                self._sample()
                if not self._readers and self.record.ranks:
                    # Every rank found has ended: the next ones are looked for from the next sample on, not after a
                    # settled REDISCOVER_S (a faithful pass started then and ended inside it went unseen)
                    next_discovery = min(next_discovery, self.elapsed())
                state, words, bars = self._log_words()
                if self.screen is not None and self.elapsed() >= next_draw:
                    self.screen.draw(lines(self.record, self.elapsed(), words, bars))
                    next_draw = self.elapsed() + self.interval_s
                if not self.target.alive():
                    self.record.end_reason = "exited"
                    break
                if state == "ready":
                    self.record.end_reason = "ready"
                    # The sample above may be older than the load's last reads, which ended before the ready line:
                    # one more look, so that a shard read in between is seen whole.
                    self._sample()
                    break
                if self.timeout_s is not None and self.elapsed() >= self.timeout_s:
                    self.record.end_reason = "timeout"
                    break
                wait = self.interval_s if self.record.ranks else min(self.interval_s, FIRST_RANK_POLL_S)
                time.sleep(max(0.0, wait - (self._clock() - began)))
        except KeyboardInterrupt:
            self.record.end_reason = "interrupted"
        self._finish()
        return self.record

    def _finish(self) -> None:
        if self.record.end_reason == "exited":
            if self.target.popen is not None:
                self.record.exit_code = self.target.popen.wait()
            time.sleep(min(self.interval_s, 0.2))  # ranks that end with the launcher: a moment to go
            self._sample()
            for pid in self._readers:
                track = self._tracks[pid]
                self.record.notes.append(
                    f"{track.label} (pid {pid}) was still running when the launcher ended (orphaned)"
                )
            if self.target.popen is not None:
                for thread in self._pumps:
                    thread.join(timeout=2)
        if self.stacks is not None:
            self.stacks.stop()
            if self.stacks.note:
                self.record.notes.append(self.stacks.note)
        if self._follower is not None:
            self._follower.stop()
            if self._follower.error:
                self.record.notes.append(self._follower.error)
        self.record.duration_s = self.elapsed()
        self.record.ended_at = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        if self.log is not None:
            self.record.log_report = self.log.report().to_dict()
        self.record.notes += findings(self.record)
        self.residency.close()
        if self.record.gpu is not None:
            self.record.gpu.close()
        if self.screen is not None:
            _, words, bars = self._log_words()
            self.screen.draw(lines(self.record, self.elapsed(), words, bars), force=True)
            self.screen.finish()

    # -- after the session: a server watch started keeps running --------------------------------------------------

    def stop_child(self, sig: int) -> None:
        """Pass the user's signal on to the server watch started and wait for it and its processes; whatever
        is left of them after a grace gets the signal itself, then SIGKILL: nothing watch started outlives it."""
        popen = self.target.popen
        if popen is None or popen.poll() is not None:
            return
        try:
            family = psutil.Process(popen.pid).children(recursive=True)
        except psutil.Error:
            family = []
        popen.send_signal(sig)
        deadline = time.monotonic() + CHILD_STOP_GRACE_S
        try:
            popen.wait(timeout=CHILD_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        _, alive = psutil.wait_procs(family, timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        _, alive = psutil.wait_procs(alive, timeout=max(0.5, deadline - time.monotonic()))
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=2)
        self.record.exit_code = popen.returncode

    def wait_child(self) -> int | None:
        """Keep passing the server's output through until it exits; its exit code."""
        popen = self.target.popen
        if popen is None:
            return None
        code = popen.wait()
        for thread in self._pumps:
            thread.join(timeout=2)
        return code


def findings(record: WatchRecord) -> list[str]:
    """What the figures say, in sentences (each only where its figures are known)."""
    out: list[str] = []
    if not record.ranks:
        out.append(
            "no rank process was seen (no sglang::scheduler_*, VLLM::EngineCore or worker under the pid)"
        )
        return out
    ckpt = record.checkpoint_bytes()
    watched = record.storage_bytes_watched()
    at_start = sum(s.resident_at_start for m in record.models for s in m.shards)
    # Past loading: nothing fetched, every shard already in memory, and the ranks idle - a warm load reads
    # nothing from storage either, but it keeps its ranks busy.
    idle = all(
        (r.delta("user_s") or 0.0) + (r.delta("system_s") or 0.0)
        < IDLE_CPU_SHARE * max(record.duration_s, 1e-9)
        for r in record.ranks
    )
    if (
        not record.started_by_watch
        and ckpt
        and watched is not None
        and watched < 0.01 * ckpt
        and at_start >= 0.99 * ckpt
        and idle
    ):
        before = record.storage_bytes_total() or 0
        out.append(
            f"the server was already past loading when watch attached: every shard was in the page cache, the "
            f"ranks were idle and read {human_bytes(watched)} from storage while watched ({human_bytes(before)} "
            "since they started)"
        )
    amp = record.amplification()
    if amp is not None and amp > 1.2:
        out.append(
            f"read amplification {amp:.2f}x: the ranks fetched {human_bytes(record.storage_bytes_total() or 0)} "
            f"from storage for a {human_bytes(ckpt)} checkpoint"
        )
    # A rank ended early when the launcher or another rank outlived it by more than a second: ranks that end with
    # the server (a clean shutdown, a launcher that stops them) are not named.
    ends = [record.duration_s] + [
        r.gone_s if r.gone_s is not None else record.duration_s for r in record.ranks
    ]
    # ckptprof run's ranks end when their load is done, before the run writes its report: not early.
    early = [
        r
        for r in record.ranks
        if r.gone_s is not None and r.gone_s < max(ends) - EARLY_END_S and r.rank.role.engine != "ckptprof"
    ]
    for r in early:
        read = r.read_bytes_total()
        out.append(
            f"{r.label} (pid {r.rank.pid}) ended at {r.gone_s:.1f} s while the server went on"
            + (f", after reading {human_bytes(read)} from storage" if read is not None else "")
        )
    return out
