"""Running the ranks: one spawned process per TP rank, or joining a torchrun / torch.distributed launch.

Spawned ranks report over a queue; a rank that dies is noticed by its exit code within a poll interval and
marked failed with its signal, the barrier is aborted so no rank waits forever, and on Ctrl-C every child is
terminated (then killed) before the partial results are returned. Under torchrun, results are gathered to
rank 0 over a gloo group; several nodes are torchrun's job, never a home-made launcher.
"""

from __future__ import annotations

import os
import queue as queue_mod
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ckptprof.replay.plan import ReplayPlan
from ckptprof.session import RankResult, ShardTiming, rank_from_dict

ProgressFn = Callable[[int, str, ShardTiming], None]
POLL_S = 0.2


class Interrupted(Exception):
    """Ctrl-C during the replay; carries the partial per-rank results."""

    def __init__(self, results: list[RankResult]) -> None:
        super().__init__("interrupted")
        self.results = results


def in_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


# -- spawned ranks -------------------------------------------------------------------------------------------


def _rank_main(plan_dict: dict[str, Any], rank: int, faithful: bool, results: Any, barrier: Any) -> None:
    # Ctrl-C goes to the whole process group; the parent decides what to do, so the child lets it through
    # as KeyboardInterrupt (the worker turns it into a failed, partial result).
    from ckptprof.replay.worker import replay_rank

    plan = ReplayPlan.from_dict(plan_dict)

    def wait() -> None:
        barrier.wait(timeout=600)

    def shard_done(role: str, timing: ShardTiming) -> None:
        results.put(("shard", rank, role, asdict(timing)))

    result = replay_rank(plan, rank, faithful=faithful, wait_for_all=wait, on_shard_done=shard_done)
    results.put(("result", rank, asdict(result)))


def run_spawned(
    plan: ReplayPlan, faithful: bool = False, progress: ProgressFn | None = None
) -> list[RankResult]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    barrier = ctx.Barrier(plan.tp)
    plan_dict = plan.to_dict()
    procs = [
        ctx.Process(
            target=_rank_main, args=(plan_dict, r, faithful, results, barrier), daemon=True, name=f"rank{r}"
        )
        for r in range(plan.tp)
    ]
    for p in procs:
        p.start()
    done: dict[int, RankResult] = {}
    try:
        _collect(procs, results, barrier, done, progress)
    except KeyboardInterrupt:
        _drain(results, done, progress, seconds=2.0)
        _stop(procs)
        raise Interrupted(_finish(plan, procs, done, "interrupted before reporting")) from None
    finally:
        _stop(procs)
    return _finish(plan, procs, done, "exited without reporting")


def _collect(
    procs: list[Any], results: Any, barrier: Any, done: dict[int, RankResult], progress: ProgressFn | None
) -> None:
    dead_since: dict[int, float] = {}
    while len(done) < len(procs):
        _drain(results, done, progress, seconds=POLL_S)
        for rank, p in enumerate(procs):
            if rank in done or p.exitcode is None:
                continue
            # The process is gone; give its last queue message a moment to arrive before declaring it dead.
            first = dead_since.setdefault(rank, time.monotonic())
            if time.monotonic() - first > 1.0:
                done[rank] = RankResult(rank=rank, device="", status="failed", error=_exit_reason(p.exitcode))
                barrier.abort()  # ranks still waiting at the start barrier must not wait for a dead one


def _drain(results: Any, done: dict[int, RankResult], progress: ProgressFn | None, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            return
        try:
            msg = results.get(timeout=timeout)
        except queue_mod.Empty:
            return
        if msg[0] == "shard" and progress is not None:
            _, rank, role, timing = msg
            progress(rank, role, ShardTiming(**timing))
        elif msg[0] == "result":
            _, rank, data = msg
            done[rank] = rank_from_dict(data)


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of host memory? the OOM killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"rank process killed by {name}{hint}"
    return f"rank process exited with code {code} without reporting"


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 3.0
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=1.0)


def _finish(
    plan: ReplayPlan, procs: list[Any], done: dict[int, RankResult], missing: str
) -> list[RankResult]:
    out = []
    for rank, p in enumerate(procs):
        r = done.get(rank)
        if r is None:
            reason = _exit_reason(p.exitcode) if p.exitcode not in (None, 0) else missing
            r = RankResult(rank=rank, device=plan.rank_device(rank), status="failed", error=reason)
        if not r.device:
            r.device = plan.rank_device(rank)
        out.append(r)
    return out


# -- torchrun ------------------------------------------------------------------------------------------------


class TorchrunGroup:
    """This process is one rank of a torchrun launch: RANK, WORLD_SIZE, LOCAL_RANK come from the environment."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world_size)))
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_node_leader(self) -> bool:
        return self.local_rank == 0

    def barrier(self) -> None:
        self.dist.barrier()

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        out: list[Any] | None = [None] * self.world_size if self.is_main else None
        self.dist.gather_object(obj, out, dst=0)
        return out

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def run_joined(
    group: TorchrunGroup, plan: ReplayPlan, faithful: bool = False, progress: ProgressFn | None = None
) -> list[RankResult] | None:
    """Replay this process's rank, then gather everyone's results to rank 0 (others get None)."""
    from ckptprof.replay.worker import replay_rank

    def shard_done(role: str, timing: ShardTiming) -> None:
        if progress is not None:
            progress(group.rank, role, timing)

    result = replay_rank(
        plan, group.rank, faithful=faithful, wait_for_all=group.barrier, on_shard_done=shard_done
    )
    gathered = group.gather(asdict(result))
    if gathered is None:
        return None
    return [rank_from_dict(d) for d in gathered]


class ProgressPrinter:
    """A tqdm bar per model over all ranks' shards, with a compact per-rank count in its postfix."""

    def __init__(self, plan: ReplayPlan, label: str = "", enabled: bool = True) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self._enabled = enabled
        self._plan = plan
        self._label = label
        self._totals = {m.role: len(m.shards) for m in plan.models}
        self._counts: dict[tuple[str, int], int] = {}
        self._bars: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, rank: int, role: str, timing: ShardTiming) -> None:
        if not self._enabled:
            return
        with self._lock:
            bar = self._bars.get(role)
            if bar is None:
                desc = f"{self._label}{role} shards x {self._plan.tp} ranks"
                bar = self._tqdm(
                    total=self._totals.get(role, 0) * self._plan.tp, desc=desc, unit="shard", leave=False
                )
                self._bars[role] = bar
            self._counts[(role, rank)] = self._counts.get((role, rank), 0) + 1
            bar.update(1)
            if self._plan.tp > 1:
                per_rank = " ".join(str(self._counts.get((role, r), 0)) for r in range(self._plan.tp))
                bar.set_postfix_str(f"per rank: {per_rank} /{self._totals.get(role, 0)}", refresh=False)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
