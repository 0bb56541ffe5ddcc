"""The two passes bench_faithful_overhead.py compares, for one rank or for every rank of a TP group at once.

A pass is either the faithful replay as a rank runs it (``loader/worker.replay_rank`` with ``faithful=True``, its
closed shards put on a multiprocessing queue as ``loader/ranks.py`` does) or the reference loader
(``reference_loader.py``). Every rank of a TP group at once: one spawned process per rank, all on the plan's
devices, starting each pass together after allocating (as ckptprof's ranks wait at a barrier); a pass's wall is its
slowest rank's, as a load's is.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import overhead_breakdown
import torch
from reference_loader import reference_load

from ckptprof.checkpoint import fs
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.recorder import shard_dict
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.worker import replay_rank
from ckptprof.session import RankResult, ShardTiming

PASSES = ("faithful", "reference")
# How long a spawned rank may take over one pass before the benchmark gives up on it.
PASS_TIMEOUT_S = 300.0


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def prepare_cache(plan: ReplayPlan) -> None:
    """Warm: read the checkpoint once through the page cache; cold: drop its pages (what ``--cache`` does)."""
    files = [f for model in plan.models for f in model.files]
    if plan.cache == "cold":
        fs.drop_cache(files)
    else:
        fs.warm_cache(files)


class ParentQueue:
    """Where a spawned rank puts each closed shard (``loader/ranks.py``): a multiprocessing queue, whose feeder
    thread pickles beside the load. Drained after each pass, outside its wall."""

    def __init__(self) -> None:
        self._queue: Any = multiprocessing.get_context("spawn").Queue()

    def shards_done(self, batch: list[tuple[str, ShardTiming]]) -> None:
        self._queue.put(("shards", 0, [(role, shard_dict(timing)) for role, timing in batch]))

    def drain(self, expected: int) -> None:
        """Take the pass's ``expected`` shards off the queue (each batch came through the feeder thread and the
        pipe)."""
        while expected > 0:
            expected -= len(self._queue.get(timeout=30)[2])

    def close(self) -> None:
        self._queue.close()
        self._queue.join_thread()


def faithful_pass(
    plan: ReplayPlan, rank: int, parent: ParentQueue, together: Callable[[], None] | None = None
) -> tuple[float, RankResult]:
    """A rank's faithful replay; its wall as the rank measures it (parameters allocated before, outside it)."""
    result = replay_rank(plan, rank, faithful=True, wait_for_all=together, on_shards_done=parent.shards_done)
    sync(plan.rank_device(rank))
    parent.drain(sum(len(m.shards) for m in result.models))
    if result.status != "ok" or result.error:
        raise RuntimeError(f"rank {rank}'s faithful pass failed: {result.error}")
    return result.wall_s, result


def reference_pass(plan: ReplayPlan, rank: int, together: Callable[[], None] | None = None) -> float:
    """The reference loop on fresh parameters, timed the way a rank times its wall (from the first open to the
    last copy issued; the copies landing is waited for after the clock stops, on both sides)."""
    device = plan.rank_device(rank)
    ctx = LoadContext(rank=rank, tp=plan.tp, device=torch.device(device), decompose=False)
    for model in plan.models:
        ctx.allocate(model)
    sync(device)
    if together is not None:
        together()
    began = time.perf_counter()
    reference_load(plan, ctx)
    wall = time.perf_counter() - began
    sync(device)
    return wall


def _rank_main(plan_dict: dict[str, Any], rank: int, order: list[str], barrier: Any, results: Any) -> None:
    """One spawned rank: every pass of ``order``, each started with the others after rank 0 prepared the cache."""
    torch.set_num_threads(1)
    overhead_breakdown.install()
    plan = ReplayPlan.from_dict(plan_dict)
    parent = ParentQueue()
    try:
        for index, name in enumerate(order):
            barrier.wait(PASS_TIMEOUT_S)  # every rank is done with the pass before
            if rank == 0:
                prepare_cache(plan)
            barrier.wait(PASS_TIMEOUT_S)

            def together() -> None:
                barrier.wait(PASS_TIMEOUT_S)

            overhead_breakdown.reset()
            if name == "faithful":
                wall, _ = faithful_pass(plan, rank, parent, together)
            else:
                wall = reference_pass(plan, rank, together)
            results.put((index, rank, wall, overhead_breakdown.taken()))
    except BaseException as exc:
        barrier.abort()
        results.put((-1, rank, f"{type(exc).__name__}: {exc}", {}))
    finally:
        parent.close()


def all_ranks(
    plan: ReplayPlan, order: list[str], breakdowns: dict[int, dict[int, dict[str, float]]] | None = None
) -> list[float]:
    """Every pass of ``order`` run by all ``plan.tp`` ranks at once, each in its own process: each pass's wall (its
    slowest rank's). ``breakdowns``, when given, receives each pass's per-rank ``overhead_breakdown`` sums (empty
    unless CKPTPROF_BENCH_BREAKDOWN is set)."""
    mp = multiprocessing.get_context("spawn")
    barrier = mp.Barrier(plan.tp)
    results = mp.Queue()
    procs = [
        mp.Process(target=_rank_main, args=(plan.to_dict(), rank, order, barrier, results), daemon=True)
        for rank in range(plan.tp)
    ]
    for proc in procs:
        proc.start()
    walls: dict[int, float] = {}
    try:
        for _ in range(len(order) * plan.tp):
            index, rank, wall, breakdown = results.get(timeout=PASS_TIMEOUT_S * 2)
            if index < 0:
                raise RuntimeError(f"rank {rank}: {wall}")
            walls[index] = max(walls.get(index, 0.0), wall)
            if breakdowns is not None and breakdown:
                breakdowns.setdefault(index, {})[rank] = breakdown
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return [walls[i] for i in range(len(order))]
