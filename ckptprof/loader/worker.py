"""One TP rank's replay: allocate the per-rank parameters, wait for the others, load target then draft."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import psutil
import torch

from ckptprof.checkpoint import diskstats
from ckptprof.loader import engine_output, memory
from ckptprof.loader.changed import changed_files, explain_shard_error
from ckptprof.loader.copytimers import CudaCopyTimer, HostCopyTimer
from ckptprof.loader.counters import process_storage_read_bytes
from ckptprof.loader.launch import Launch
from ckptprof.loader.plan import ReplayPlan
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.loader.strategies import get_strategy, param_digests
from ckptprof.loader.strategies.base import LoadContext, Strategy
from ckptprof.loader.strategies.sglang_own import SGLangOwnIterator, own_call
from ckptprof.session import RankResult, ShardTiming

ShardCallback = Callable[[str, ShardTiming], None]
# Several closed shards at once, (role, shard) each in closing order: the faithful pass hands them over in batches.
ShardsCallback = Callable[[list[tuple[str, ShardTiming]]], None]


def strategies_by_role(plan: ReplayPlan, faithful: bool = False) -> dict[str, Strategy]:
    """One strategy object per loading path: the draft shares the target's unless it has its own. The faithful
    pass of a plan with ``faithful_own`` drives SGLang's own iterator for each path that has one."""
    own = faithful and plan.faithful_own

    def make(name: str, params: dict[str, Any]) -> Strategy:
        if own and own_call(name, params) is not None:
            return SGLangOwnIterator(name, params)
        return get_strategy(name, **params)

    target = make(plan.strategy, dict(plan.strategy_params))
    out = {model.role: target for model in plan.models}
    if plan.draft_strategy is not None and "draft" in out:
        out["draft"] = make(*plan.strategy_for("draft"))
    return out


def _disk_samples(disks: list[str | None]) -> dict[str, diskstats.DiskSample | None]:
    """These block devices' counters now, from one read of /proc/diskstats."""
    names = {disk for disk in disks if disk}
    if not names:
        return {}
    try:
        text = diskstats.DISKSTATS.read_text()
    except OSError:
        return {}
    return {name: diskstats.sample(name, text) for name in names}


def unique(strategies: dict[str, Strategy]) -> list[Strategy]:
    return list({id(s): s for s in strategies.values()}.values())


def replay_rank(
    plan: ReplayPlan,
    rank: int,
    faithful: bool = False,
    wait_for_all: Callable[[], None] | None = None,
    on_shard_done: ShardCallback | None = None,
    launch: Launch | None = None,
    keep_params: list[Any] | None = None,
    on_shards_done: ShardsCallback | None = None,
) -> RankResult:
    """Run one rank. ``faithful`` replays SGLang's exact sequence, timing only shard walls.

    ``on_shards_done``, when given, takes the faithful recorder's batches of closed shards in one call each
    (``on_shard_done`` still takes every shard the decomposed pass closes, as it closes).

    ``keep_params``, when given, receives the load's parameters (its ``LoadContext``) so that they outlive this
    call: a caller that times loads back to back (the resident ranks) frees them outside its timed part.

    With ``plan.verify`` the result also carries a digest of every parameter after the load (decomposed pass only),
    so the strategies' loads can be compared value for value.
    """
    # ModelRunner.load_model does this first; it also keeps 8 rank processes from fighting over cores.
    torch.set_num_threads(1)
    device_name = plan.rank_device(rank)
    device = torch.device(device_name)
    result = RankResult(rank=rank, device=device_name, host=socket.gethostname(), pid=os.getpid())
    proc = psutil.Process()
    cpu0 = proc.cpu_times()
    recorder: Recorder | None = None
    strategies: dict[str, Strategy] = {}
    # A real engine's own iterator writes to the terminal (its import's warnings, its loggers): kept, not shown.
    captured: engine_output.Captured | None = None
    output = contextlib.ExitStack()
    try:
        copy_timer = _copy_timer(device)
        ctx = LoadContext(
            rank=rank,
            tp=plan.tp,
            device=device,
            expert_parallel=plan.expert_parallel,
            decompose=not faithful,
            launch=launch,
        )
        if keep_params is not None:
            keep_params.append(ctx)
        for model in plan.models:
            result.param_bytes += ctx.allocate(model)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        recorder_cls = WallOnlyRecorder if faithful else Recorder
        recorder = recorder_cls(
            copy_timer=copy_timer,
            on_shard_done=on_shard_done,
            on_shards_done=on_shards_done if faithful else None,
        )
        strategies = strategies_by_role(plan, faithful)
        engines = [s for s in unique(strategies) if isinstance(s, SGLangOwnIterator)]
        if engines:
            captured = output.enter_context(engine_output.capture())
        _prepare(strategies, engines, ctx, plan, result)
        _settle_heap()
        disks = [diskstats.device_for(model.path) for model in plan.models]
        if wait_for_all is not None:
            wait_for_all()  # like SGLang's TP workers, every rank starts reading at the same moment
        result.rss_before_load_bytes = memory.current_rss_bytes()
        result.read_bytes_before_load = process_storage_read_bytes(proc)
        peak_resettable = memory.reset_peak_rss()
        _timed_load(plan, ctx, recorder, strategies, result, disks)
        if peak_resettable:  # read before --verify's digests copy parameters to the host
            result.load_peak_rss_bytes = memory.peak_rss_bytes()
        if plan.verify and not faithful:
            result.checksums = param_digests(ctx)
        _explain_failed_shards(plan, recorder, result)
    except (KeyboardInterrupt, Exception) as exc:
        result.status = "failed"
        result.error = _failure(exc, plan, device_name)
    finally:
        for strategy in unique(strategies):
            # Releasing buffers or a process group must not hide the load's own outcome.
            with contextlib.suppress(Exception):
                strategy.close()
        output.close()
        _keep_engine_output(result, captured)
        if recorder is not None:
            # A failed load's closed shards too reach the parent before its result.
            with contextlib.suppress(Exception):
                recorder.flush_deliveries()
            result.models = list(recorder.models)
        cpu1 = proc.cpu_times()
        result.cpu_user_s = cpu1.user - cpu0.user
        result.cpu_sys_s = cpu1.system - cpu0.system
        # ru_maxrss is in KiB on Linux.
        result.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return result


def _copy_timer(device: torch.device) -> Any:
    """CUDA events around each copy on a GPU, the host's clock on the CPU."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
        return CudaCopyTimer(device)
    return HostCopyTimer()


def _prepare(
    strategies: dict[str, Strategy],
    engines: list[SGLangOwnIterator],
    ctx: LoadContext,
    plan: ReplayPlan,
    result: RankResult,
) -> None:
    """Set-up a server does before loading (process groups, pinned buffer rings, importing the engine): outside
    the timed wall, like allocating the parameters."""
    for strategy in unique(strategies):
        began = time.perf_counter()
        strategy.prepare(ctx, plan)
        if strategy in engines:  # the engine's import: its own figure, never part of a wall
            result.engine_import_s = (result.engine_import_s or 0.0) + time.perf_counter() - began


def _settle_heap() -> None:
    """Collect what importing torch and the engine made, outside the wall.

    A fresh rank's heap holds every object those imports created, and the first full collection walks them all: with
    vLLM 0.11.0 imported, 0.3-0.4 s on the 2-core VM, which fell inside the engine's timed load in every round
    (target walls 0.36 s against 0.015 s for the replica, whose rank imports less) unless something else moved it
    earlier (CI=true in the environment did, and so did a sitecustomize that imported one module more: both change
    how much was allocated when). Whether the collector runs inside a load is then the heap's luck, not the loader's
    cost. After one full collection the next waits for the heap to grow by a quarter, which a load's Python objects
    do not. Not frozen, unlike resident ranks' heaps (resident.py), whose rounds repeat: a fresh rank loads once."""
    gc.collect()


def _timed_load(
    plan: ReplayPlan,
    ctx: LoadContext,
    recorder: Recorder,
    strategies: dict[str, Strategy],
    result: RankResult,
    disks: list[str | None],
) -> None:
    """The timed wall: every model in turn, and the block devices' busy time and reads across each model."""
    # /proc/diskstats is read once at each boundary between models, the first before the wall starts and the
    # last after it ends, not on each side of every model: none inside the wall of a single model's load (a
    # read costs up to a millisecond on a host with many block devices).
    boundaries = [_disk_samples(disks[:1])]
    timed_models = []
    recorder.start()
    result.started_monotonic = time.monotonic()
    started = time.perf_counter()
    for i, model in enumerate(plan.models):
        # The faithful recorder's last deliveries (a rank's shards on their way to the parent) go after the
        # wall: one shard's dict and queue put each, in order, before the result (flushed below).
        with recorder.model(model.role, flush_at_end=False) as timed:
            strategies[model.role].load_model(ctx, model, recorder)
        timed_models.append(timed)
        if i + 1 < len(plan.models):
            boundaries.append(_disk_samples(disks[i : i + 2]))
    result.wall_s = time.perf_counter() - started
    boundaries.append(_disk_samples(disks[-1:]))
    recorder.flush_deliveries()
    for i, (timed, disk) in enumerate(zip(timed_models, disks, strict=False)):
        before = boundaries[i].get(disk) if disk else None
        after = boundaries[i + 1].get(disk) if disk else None
        if before is not None and after is not None:
            timed.disk = disk
            timed.disk_busy_s = after.busy_since(before)
            timed.disk_read_bytes = after.read_since(before)


def _explain_failed_shards(plan: ReplayPlan, recorder: Recorder, result: RankResult) -> None:
    failed = [s for m in recorder.models for s in m.shards if s.status != "ok"]
    for shard in failed:  # a raw EFAULT or "incomplete metadata" is a file that shrank under the load
        shard.error = explain_shard_error(plan, shard.file, shard.error or "failed")
    if failed:
        result.error = f"{len(failed)} shard(s) failed; first: {failed[0].file}: {failed[0].error}"


def _failure(exc: BaseException, plan: ReplayPlan, device_name: str) -> str:
    """Why a rank failed, in one line: where the exception came from, or the file that changed under the load."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    if isinstance(exc, threading.BrokenBarrierError):
        return "stopped before loading: another rank died before the start barrier"
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return f"out of device memory on {device_name}: {str(exc).splitlines()[0]}"
    if isinstance(exc, MemoryError):
        return "out of host memory (MemoryError)"
    last = traceback.extract_tb(exc.__traceback__)[-1:]
    where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
    error = f"{type(exc).__name__}: {exc}{where}"
    changed = changed_files(plan)
    if changed:
        error = f"{changed[0].path}: {changed[0].cause()}: {error}"
    return error


def _keep_engine_output(result: RankResult, captured: engine_output.Captured | None) -> None:
    """What a real engine wrote while it loaded; a failed rank's error ends with what it said last."""
    if captured is None or not captured.total_bytes:
        return
    result.engine_output = captured.text
    if result.status != "ok" or result.error:
        summary = engine_output.summarise(captured.text)
        result.error = f"{result.error}; {summary.sentence('the engine')}"
