"""Rank processes kept across loads, for timing the load alone (the pytest plugin's rounds).

``ranks.run_spawned`` starts the ranks for one load and gathers it: a benchmark of it times spawning the processes
and importing torch in them too, a hundred times the load of a small checkpoint. Here the ranks are started once
and every load runs the same rank code (``ranks._rank_main``) again in the same processes, over one pipe per rank:
``arm()`` has every rank allocate its parameters and prepare its strategy up to its start line (not timed);
``release()`` wakes every rank with one pipe write and returns when each rank has said it loaded its last shard (its
copies waited for), so a caller timing ``release()`` times the load from a common start to the last rank's end plus
the signals; ``results()`` then takes the results, which the ranks send after their bookkeeping.
The ranks die with this process (PR_SET_PDEATHSIG), and ``close()`` runs at exit if nobody called it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any

from ckptprof.loader import rank_start
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.ranks import (
    _die_with_parent,
    _exit_reason,
    _main_without_missing_file,
    _rank_main,
    _title,
)
from ckptprof.session import RankResult, rank_from_dict

# What the parent says to a rank.
_ROUND, _STOP = "round", "stop"
# ... and the byte that starts (or aborts) one rank's round, on the pipe all ranks share.
_GO, _ABORT = b"g", b"a"
# How long a rank may take to start (spawn, import torch) or to stop before it is killed.
START_TIMEOUT_S = 300.0
STOP_GRACE_S = 3.0


class RankFailed(Exception):
    """A rank that could not start, load or answer; the message is one line naming the rank."""


# -- the rank's side -----------------------------------------------------------------------------------------


class _Reports:
    """What ``_rank_main`` reports, sent to the parent: "loaded" when the rank's last shard is done (its copies
    waited for), then the result. The result comes after the rank's bookkeeping (phase splits, closing the strategy,
    its CPU times, the parameters' digests) and is not waited for in the timed round; each shard is in it, so no
    message per shard has the parent reading the pipe while the load runs."""

    def __init__(self, conn: Connection, shards: int) -> None:
        self.conn = conn
        self.shards = shards
        self.done = 0
        # The load's parameters, kept alive until the result is sent (see _StartLine.wait).
        self.held: list[Any] = []

    def put(self, message: tuple[Any, ...]) -> None:
        if message[0] in ("shard", "shards"):
            was = self.done
            self.done += 1 if message[0] == "shard" else len(message[2])
            if was < self.shards <= self.done:
                self.conn.send(("loaded", message[1]))
        elif message[0] == "result":
            self.conn.send(message)
            self.held.clear()


class _StartLine:
    """The start barrier ``_rank_main`` waits at, held by the parent: the rank says it is ready on its own pipe, then
    reads one byte from the pipe every rank shares. One write of a byte per rank wakes them all: the parent is not
    writing to rank 1 while rank 0 already loads (or has taken the parent's core). An abort byte (another rank failed
    before its start line) stops the round as a broken barrier does."""

    def __init__(self, conn: Connection, go: Connection, rank: int) -> None:
        self.conn = conn
        self.go = go
        self.rank = rank

    def wait(self, timeout: float | None = None) -> None:
        self.conn.send(("ready", self.rank))
        if os.read(self.go.fileno(), 1) != _GO:
            raise threading.BrokenBarrierError

    def abort(self) -> None:
        """The rank failed before its start line: its result says so, and the parent aborts the others."""


def _resident_main(
    conn: Connection, go: Connection, plan_dict: dict[str, Any], rank: int, env: dict[str, str]
) -> None:
    rank_start.apply_environment(env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C, as with run_spawned's ranks
    _die_with_parent()
    _title(rank)  # ckptprof:TP3, as a run's rank: what ps, watch and a test that stops it go by
    # torch and the strategies are imported (with this module): put what they made out of the collector's reach.
    # A full collection walks every object torch created (~0.1 s here) and fell in the first rounds' timed part;
    # a resident rank would otherwise pay it at random moments of the rounds, which a fresh rank does not repeat.
    gc.collect()
    gc.freeze()
    # Every rank opens every readable shard (TP slices within each): a rank that skips one (expert parallel) never
    # says "loaded", and its result ends its part of the round instead.
    plan = ReplayPlan.from_dict(plan_dict)
    shards = sum(1 for model in plan.models for shard in model.shards if shard.error is None)
    conn.send(("started", rank, os.getpid()))
    while True:
        try:
            order = conn.recv()
        except EOFError:  # the parent closed its end: nothing more to do
            return
        if order != _ROUND:
            return
        reports = _Reports(conn, shards)
        # replay_rank would free the parameters it loaded when it returns, before the result is sent: a 128 MB
        # rank spent 5-30 ms unmapping them inside the timed round here. A server keeps its weights; so does this
        # round, until the result is out (the free then falls in the next round's untimed preparation).
        _rank_main(plan_dict, rank, False, reports, _StartLine(conn, go, rank), keep_params=reports.held)


# -- the parent's side ---------------------------------------------------------------------------------------


class ResidentRanks:
    """``plan.tp`` rank processes that load ``plan`` once per ``arm()`` + ``release()``."""

    def __init__(self, plan: ReplayPlan) -> None:
        self.plan = plan
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.go: Connection | None = None
        self.pids: list[int] = []
        self.armed = False
        # The last release on the host's monotonic clock (the ranks' ``started_monotonic`` is on the same clock):
        # when the go was written, and when the last rank had loaded its last shard.
        self.released_at = self.answered_at = 0.0
        self.pending: dict[int, tuple[Any, ...]] | None = None  # released, results not yet taken

    def __enter__(self) -> ResidentRanks:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Spawn the ranks and wait until each has imported torch and the strategies."""
        ctx = rank_start.context()
        plan_dict = self.plan.to_dict()
        go_read, self.go = ctx.Pipe(duplex=False)
        atexit.register(self.close)
        with _main_without_missing_file():
            for rank in range(self.plan.tp):
                ours, theirs = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=_resident_main,
                    args=(theirs, go_read, plan_dict, rank, rank_start.environment()),
                    daemon=True,
                    name=f"rank{rank}",
                )
                proc.start()
                rank_start.track(proc)
                theirs.close()  # the rank holds the only other end: its death reads as EOF here
                self.procs.append(proc)
                self.conns.append(ours)
        go_read.close()
        started = self._gather(START_TIMEOUT_S, "start")
        for rank in range(self.plan.tp):
            if started[rank][0] != "started":
                raise RankFailed(_failure_line(self.plan, started[rank]))
        self.pids = [started[rank][2] for rank in range(self.plan.tp)]

    def arm(self) -> None:
        """Every rank allocates and prepares for one load and waits at its start line. A rank that fails before it
        raises ``RankFailed`` (the others are stopped at their start lines and wait for the next round)."""
        if self.pending is not None:
            self.results()
        self._send_all(_ROUND)
        answers = self._gather(self.plan.rank_timeout_s, "prepare")
        failed = [rank for rank, msg in answers.items() if msg[0] != "ready"]
        if failed:
            waiting = [rank for rank, msg in answers.items() if msg[0] == "ready"]
            self._signal(_ABORT * len(waiting))
            self._gather(self.plan.rank_timeout_s, "stop", only=waiting)
            raise RankFailed(_failure_line(self.plan, answers[failed[0]]))
        self.armed = True

    def release(self) -> None:
        """Start the armed load on every rank at once; returns when every rank has loaded its last shard (or
        stopped). ``results()`` then takes the round's results."""
        if not self.armed:
            self.arm()
        self.armed = False
        self.released_at = time.monotonic()
        self._signal(_GO * self.plan.tp)
        self.pending = self._gather(self.plan.rank_timeout_s, "load")
        self.answered_at = time.monotonic()

    def results(self) -> list[RankResult]:
        """The released round's per-rank results (``RankFailed`` for a rank that died)."""
        if self.pending is None:
            raise RankFailed("no round was released")
        answers, self.pending = self.pending, None
        loaded = [rank for rank, msg in answers.items() if msg[0] == "loaded"]
        if loaded:
            answers.update(self._gather(self.plan.rank_timeout_s, "report", only=loaded))
        results: list[RankResult] = []
        for rank in range(self.plan.tp):
            msg = answers[rank]
            if msg[0] != "result":
                raise RankFailed(_failure_line(self.plan, msg))
            result = rank_from_dict(msg[2])
            result.device = result.device or self.plan.rank_device(rank)
            results.append(result)
        return results

    def close(self) -> None:
        """Stop the ranks: ask, then terminate, then kill. Safe to call twice; runs at exit if not called."""
        atexit.unregister(self.close)
        for conn in self.conns:
            # The rank may be gone, or busy with a round: terminate() below.
            with contextlib.suppress(OSError, ValueError):
                conn.send(_STOP)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
        for conn in self.conns:
            conn.close()
        if self.go is not None:
            self.go.close()
        self.procs, self.conns, self.go = [], [], None

    def _signal(self, data: bytes) -> None:
        # One write of at most a few hundred bytes: atomic, and it never blocks on a pipe's 64 KiB buffer.
        if self.go is None:
            raise RankFailed("the ranks were not started (or were closed)")
        os.write(self.go.fileno(), data)

    def _send_all(self, order: str) -> None:
        for rank, conn in enumerate(self.conns):
            try:
                conn.send(order)
            except OSError:  # the pipe is closed: the rank died since the last round
                self.procs[rank].join(timeout=1.0)
                code = self.procs[rank].exitcode
                reason = _exit_reason(code, self.plan) if code else "exited"
                raise RankFailed(_failure_line(self.plan, ("died", rank, reason))) from None

    def _gather(
        self, timeout: float | None, doing: str, only: list[int] | None = None
    ) -> dict[int, tuple[Any, ...]]:
        """One message from each rank (of ``only``), or ("died", rank, reason) for a rank that exited first."""
        pending = set(range(len(self.conns)) if only is None else only)
        answers: dict[int, tuple[Any, ...]] = {}
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([self.conns[r] for r in pending] + [self.procs[r].sentinel for r in pending], left)
            if not ready:
                rank = min(pending)
                raise RankFailed(
                    f"rank {rank} ({self.plan.rank_device(rank)}): no answer for {timeout:g} s ({doing})"
                )
            for rank in sorted(pending):
                conn = self.conns[rank]
                try:
                    if conn.poll():
                        answers[rank] = conn.recv()
                        pending.discard(rank)
                        continue
                except (EOFError, OSError):
                    pass  # the pipe closed: the rank died, told below by its exit code
                proc = self.procs[rank]
                if proc.sentinel in ready or not proc.is_alive():
                    proc.join(timeout=1.0)
                    code = proc.exitcode if proc.exitcode is not None else -signal.SIGKILL
                    answers[rank] = ("died", rank, _exit_reason(code, self.plan) if code else "exited")
                    pending.discard(rank)
        return answers


def _failure_line(plan: ReplayPlan, message: tuple[Any, ...]) -> str:
    if message[0] == "died":
        rank, reason = message[1], message[2]
    else:
        result = rank_from_dict(message[2])
        rank, reason = result.rank, result.error or result.status
    first = str(reason).splitlines()[0] if reason else "failed"
    return f"rank {rank} ({plan.rank_device(rank)}) failed: {first}"
