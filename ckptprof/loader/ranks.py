"""Running the ranks: one spawned process per TP rank (torchrun.py joins a torchrun launch instead).

Spawned ranks report over a queue; a rank that dies is noticed by its exit code within a poll interval and
marked failed with its signal, the barrier is aborted so no rank waits forever, and on Ctrl-C every child is
terminated (then killed) before the partial results are returned.

A rank that stopped making progress on a network file system that stopped answering can sit in an uninterruptible
wait in the kernel, which even SIGKILL does not end until the server answers. Such a rank is abandoned, not joined
(multiprocessing would join it at exit, forever): its pid, kernel wait, shard and Python stack go in its result,
and its death signal is already pending, so it ends as soon as the file system answers or is unmounted.
"""

from __future__ import annotations

import dataclasses
import multiprocessing.process
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from ckptprof import interrupts
from ckptprof.fstypes import is_network_fs
from ckptprof.loader import rank_start, stuck
from ckptprof.loader.changed import explain_signal_death, remember_mounts
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.progress import ProgressFn
from ckptprof.results import StuckRank
from ckptprof.session import RankModel, RankResult, ShardTiming, rank_from_dict

POLL_S = 0.2
# How often the parent looks for the ranks' messages while it waits for them.
READ_POLL_S = 0.005


class Interrupted(Exception):
    """Ctrl-C during the replay; carries the partial per-rank results."""

    def __init__(self, results: list[RankResult]) -> None:
        super().__init__("interrupted")
        self.results = results


# -- spawned ranks -------------------------------------------------------------------------------------------


def _rank_main(
    plan_dict: dict[str, Any],
    rank: int,
    faithful: bool,
    results: Any,
    barrier: Any,
    keep_params: list[Any] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    rank_start.apply_environment(env)
    # Ctrl-C reaches the whole process group. The parent owns the reaction (it stops every rank and saves what
    # the ranks reported so far), so a rank ignores SIGINT instead of dying mid-import with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _title(rank)
    from ckptprof.loader.recorder import shard_dict
    from ckptprof.loader.worker import replay_rank

    # Open the reporting path (the queue's feeder thread) before any large allocation: a rank that later runs
    # out of memory can then still say so instead of dying silently.
    results.put(("started", rank, os.getpid()))
    # Fault injection for the tests: a rank that runs out of memory.
    limit_mb = os.environ.get("CKPTPROF_FAULT_RANK_MEMORY_MB")
    if limit_mb and int(os.environ.get("CKPTPROF_FAULT_RANK", str(rank))) == rank:
        import resource

        used = psutil_vms()
        resource.setrlimit(resource.RLIMIT_AS, (used + int(limit_mb) * 2**20, resource.RLIM_INFINITY))

    plan = ReplayPlan.from_dict(plan_dict)
    remember_mounts(plan)  # while they are there: a mount that goes away is named by where it was
    # Fault-injection hooks for the tests: slow every shard down, and leave a mark per finished shard, so a
    # test can kill a rank while it is provably mid-replay.
    delay = float(os.environ.get("CKPTPROF_FAULT_DELAY_S", "0") or 0)
    marks = os.environ.get("CKPTPROF_FAULT_MARK_DIR")
    done = 0

    waited = False

    def wait() -> None:
        nonlocal waited
        waited = True
        barrier.wait(timeout=600)

    def reported(count: int) -> None:
        nonlocal done
        for _ in range(count):
            done += 1
            if marks:
                with open(os.path.join(marks, f"rank{rank}"), "w") as fh:
                    fh.write(str(done))
            if delay:
                time.sleep(delay)

    def shard_done(role: str, timing: ShardTiming) -> None:
        results.put(("shard", rank, role, shard_dict(timing)))
        reported(1)

    def shards_done(batch: list[tuple[str, ShardTiming]]) -> None:
        # One message for the faithful pass's batch: one pickle and one write by the queue's feeder thread, which
        # takes the GIL from the loading thread while it works (issue 32 item 4).
        results.put(("shards", rank, [(role, shard_dict(timing)) for role, timing in batch]))
        reported(len(batch))

    result = replay_rank(
        plan,
        rank,
        faithful=faithful,
        wait_for_all=wait,
        on_shard_done=shard_done,
        on_shards_done=shards_done,
        keep_params=keep_params,
    )
    if result.status != "ok" and not waited:
        barrier.abort()  # failed before the start barrier: the other ranks must not wait for this one
    results.put(("result", rank, asdict(result)))


RANK_TITLE = "ckptprof:TP{rank}"


def _title(rank: int) -> None:
    """Name the rank's process ``ckptprof:TP3`` (its comm, what ps and /proc/PID/comm show): a spawned rank's command
    line is multiprocessing's and says nothing of the rank, and ``ckptprof watch`` finds the ranks by this title."""
    try:
        with open("/proc/self/comm", "w") as fh:  # prctl(PR_SET_NAME) by another door: 15 bytes at most
            fh.write(RANK_TITLE.format(rank=rank)[:15])
    except OSError:  # not Linux: the title is only a name
        pass


def psutil_vms() -> int:
    import psutil

    return int(psutil.Process().memory_info().vms)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this rank if the ckptprof process dies, even by SIGKILL: no orphan keeps reading."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's terminate() on exit still applies
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


class _Collector:
    """What the ranks reported: final results, and every finished shard (the partial record of a dead rank)."""

    def __init__(self, plan: ReplayPlan, progress: ProgressFn | None, barrier: Any = None) -> None:
        self.plan = plan
        self.barrier = barrier
        self.progress = progress
        self.done: dict[int, RankResult] = {}
        self.last_progress = time.monotonic()  # when a rank last reported anything (a shard, a result)
        self.partial: dict[int, list[RankModel]] = {}

    def drain(self, results: Any, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return
            if results.empty():
                time.sleep(min(timeout, READ_POLL_S))
                continue
            msg = results.get()
            self.last_progress = time.monotonic()
            if msg[0] == "shard":
                _, rank, role, data = msg
                self._shard(rank, role, data)
            elif msg[0] == "shards":
                _, rank, batch = msg
                for role, data in batch:
                    self._shard(rank, role, data)
            elif msg[0] == "result":
                _, rank, data = msg
                self.done[rank] = rank_from_dict(data)
                if self.done[rank].status != "ok" and self.barrier is not None:
                    self.barrier.abort()  # no rank may wait at the start for one that already failed

    def _shard(self, rank: int, role: str, data: dict[str, Any]) -> None:
        timing = ShardTiming(**data)
        models = self.partial.setdefault(rank, [])
        if not models or models[-1].role != role:
            models.append(RankModel(role=role, start_s=timing.start_s))
        models[-1].shards.append(timing)
        models[-1].wall_s = timing.start_s + timing.wall_s - models[-1].start_s
        if self.progress is not None:
            self.progress(rank, role, timing)

    def fail(self, rank: int, reason: str, stuck_at: StuckRank | None = None) -> RankResult:
        """A rank that did not report: keep the shards it finished, say why it stopped (and where it stood)."""
        result = RankResult(rank=rank, device=self.plan.rank_device(rank), status="failed", error=reason)
        result.models = self.partial.get(rank, [])
        result.wall_s = sum(m.wall_s for m in result.models)
        result.stuck = stuck_at
        self.done[rank] = result
        return result

    def next_shard(self, rank: int) -> str | None:
        """The first planned shard this rank has not reported: where a rank loading in order stands."""
        reported = {(m.role, s.file) for m in self.partial.get(rank, []) for s in m.shards}
        for model in self.plan.models:
            for shard in model.shards:
                if shard.error is None and (model.role, shard.name) not in reported:
                    return shard.path
        return None

    def inspect(self, ranks: dict[int, int], with_python: bool = True) -> dict[int, StuckRank]:
        """Where each of these ranks (rank -> pid) stands, read from outside them, all at once."""
        paths = [s.path for m in self.plan.models for s in m.shards]
        if not ranks:
            return {}
        with ThreadPoolExecutor(max_workers=len(ranks), thread_name_prefix="ckptprof-inspect") as pool:
            jobs = {
                rank: pool.submit(stuck.inspect, pid, paths, self.next_shard(rank), with_python)
                for rank, pid in ranks.items()
            }
            return {rank: job.result() for rank, job in jobs.items()}


@contextmanager
def _main_without_missing_file() -> Iterator[None]:
    """A spawned child re-imports the parent's ``__main__`` from its ``__file__``; a script read from standard input
    (``python - <<EOF``) names ``<stdin>``, which the child cannot open, and every rank would die before replaying.
    The ranks need nothing from ``__main__`` (their entry point lives in this package), so while they start, a
    ``__file__`` that is not a file is hidden, as it is for ``python -c`` and notebooks."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def run_spawned(
    plan: ReplayPlan,
    faithful: bool = False,
    progress: ProgressFn | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> list[RankResult]:
    """One spawned process per rank. ``on_start(rank, pid)`` runs as each starts (py-spy attaches there)."""
    ctx = rank_start.context()
    # A SimpleQueue writes each message to the pipe before put() returns (a Queue hands it to a feeder thread):
    # a shard a rank reported survives the rank being killed the next instant (the OOM killer's SIGKILL).
    results = ctx.SimpleQueue()
    barrier = ctx.Barrier(plan.tp)
    plan_dict = plan.to_dict()
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(plan_dict, r, faithful, results, barrier, None, rank_start.environment()),
            daemon=True,
            name=f"rank{r}",
        )
        for r in range(plan.tp)
    ]
    collector = _Collector(plan, progress, barrier)
    remember_mounts(plan)
    abandoned: list[Any] = []
    try:
        with _main_without_missing_file():
            for rank, p in enumerate(procs):
                p.start()
                rank_start.track(p)
                if on_start is not None and p.pid is not None:
                    on_start(rank, p.pid)
        _collect(procs, results, barrier, collector, plan.rank_timeout_s)
    except KeyboardInterrupt:
        # The ranks ignore SIGINT and keep running a moment: what they finish meanwhile arrives before they are
        # stopped, then whatever was in flight.
        collector.drain(results, seconds=0.5)
        abandoned += _stop(procs)
        collector.drain(results, seconds=0.2)
        for rank in range(plan.tp):
            if rank not in collector.done:
                collector.fail(rank, f"interrupted ({interrupts.description()}) before the rank finished")
        _abandon(collector, procs, abandoned)
        raise Interrupted(_ordered(plan, collector)) from None
    finally:
        abandoned += _stop([p for p in procs if p not in abandoned])
    for rank, p in enumerate(procs):
        if rank not in collector.done:
            collector.fail(
                rank,
                _exit_reason(p.exitcode, plan) if p.exitcode not in (None, 0) else "exited without reporting",
            )
    _abandon(collector, procs, abandoned)
    return _ordered(plan, collector)


def _abandon(collector: _Collector, procs: list[Any], abandoned: list[Any]) -> None:
    """Ranks still alive after SIGKILL wait in the kernel (``_stop`` forgot them): say in each one's result which
    pid was left behind, why, and where it stood."""
    for p in abandoned:
        rank = procs.index(p)
        result = collector.done.get(rank)
        if result is None or result.status == "ok":
            continue
        if result.stuck is not None:
            at, cause = result.stuck, ""  # a timed-out rank: its error names the cause already
        else:
            at = collector.inspect({rank: p.pid})[rank]
            cause = _cause(at)
        # Its state when it was read may predate the kill: a FUSE wait turns uninterruptible once signalled.
        state = stuck.state_now(p.pid, at.tid) or at.state
        result.stuck = dataclasses.replace(at, abandoned=True, state=state)
        result.error = (result.error or "failed") + (
            f"{cause}; pid {p.pid} could not be stopped (an uninterruptible wait in the kernel) and was left "
            "behind: it ends when the file system answers or is unmounted"
        )


def _ordered(plan: ReplayPlan, collector: _Collector) -> list[RankResult]:
    out = [collector.done[r] for r in range(plan.tp) if r in collector.done]
    for r in out:
        r.device = r.device or plan.rank_device(r.rank)
    return out


def _collect(
    procs: list[Any], results: Any, barrier: Any, collector: _Collector, timeout: float | None
) -> None:
    """Results as the ranks send them; a rank that died, or none reporting anything for ``timeout`` seconds,
    ends the wait with the ranks marked failed."""
    dead_since: dict[int, float] = {}
    while len(collector.done) < len(procs):
        collector.drain(results, seconds=POLL_S)
        if timeout is not None and time.monotonic() - collector.last_progress > timeout:
            hung = {
                r: p.pid for r, p in enumerate(procs) if r not in collector.done and p.is_alive() and p.pid
            }
            for rank, at in collector.inspect(hung).items():
                collector.fail(
                    rank, f"timed out: no progress for {timeout:g} s (--rank-timeout){_cause(at)}", at
                )
            barrier.abort()
            return
        for rank, p in enumerate(procs):
            if rank in collector.done or p.exitcode is None:
                continue
            # The process is gone; give its last queue message a moment to arrive before declaring it dead.
            first = dead_since.setdefault(rank, time.monotonic())
            if time.monotonic() - first > 1.0:
                collector.fail(rank, _exit_reason(p.exitcode, collector.plan))
                barrier.abort()  # ranks still waiting at the start barrier must not wait for a dead one


def _cause(at: StuckRank) -> str:
    """': the fuse.sshfs file system at /mnt stopped answering (pid 12 D (uninterruptible wait) in ..., open of
    ...)' - or just where the rank stood, when it is not waiting on a network file system."""
    if at.fs_type and at.mount_point and is_network_fs(at.fs_type) and (at.in_kernel or at.wchan):
        return f": the {at.fs_type} file system at {at.mount_point} stopped answering ({at.describe()})"
    return f" ({at.describe()})"


def _exit_reason(code: int, plan: ReplayPlan) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the OOM killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return explain_signal_death(plan, f"rank process killed by {name}{hint}", name)
    return f"rank process exited with code {code} without reporting"


def _stop(procs: list[Any]) -> list[Any]:
    """Terminate, then kill, the ranks, within a few seconds in all; the ones still alive after that (waiting in
    the kernel, where SIGKILL stays pending) are returned, not waited for."""
    # A process whose start() failed (or was never reached) has nothing to stop, and joining it would raise
    # an AssertionError that hides the error that stopped the launch.
    procs = [p for p in procs if p.pid is not None]
    try:
        for p in procs:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + 3.0
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        alive = [p for p in procs if p.is_alive()]
        for p in alive:
            p.kill()
        deadline = time.monotonic() + 1.0
        for p in alive:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        # Even when a signal cuts the stop short: a rank still alive is killed and forgotten, never joined at exit.
        alive = [p for p in procs if p.is_alive()]
        _forget(alive)
    return alive


def _forget(procs: list[Any]) -> None:
    """SIGKILL these ranks and drop them from multiprocessing's children, whose exit handler joins every child it
    knows without a timeout: one in an uninterruptible wait would keep ckptprof from ever exiting. (Its death signal
    stays pending, and the parent-death signal covers one that had not been killed yet.)"""
    children = getattr(multiprocessing.process, "_children", None)
    for p in procs:
        p.kill()
        if isinstance(children, set):
            children.discard(p)
