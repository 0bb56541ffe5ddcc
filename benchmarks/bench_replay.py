"""Replay throughput (warm and cold) and the instrumentation's overhead against an uninstrumented loop.

Overhead is measured side by side in one run, rounds interleaved, so machine noise hits both alike: the ratios
(instrumented / uninstrumented) are in ``extra_info`` and held to a bound, under ``--benchmark-disable`` too (CI's
quick pass, on the small checkpoints). The bound is on the median of per-round ratios: each round's instrumented
pass against the plain pass next to it, which a machine whose speed swings within a run (the 2-core VM's plain
8 MB warm pass took 3 to 160 ms in one run) moves far less than a ratio of medians. The counted facts (every shard
recorded, its bytes, what came from storage) are asserted always. Run with ``pytest benchmarks
--benchmark-autosave``; figures for this project's machines are recorded under reports/.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture
from safetensors import safe_open

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.header import read_header
from ckptprof.loader.copytimers import CudaCopyTimer, HostCopyTimer
from ckptprof.loader.plan import ReplayPlan, build_plan
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.strategies.sglang import SGLang

ROUNDS = 5
# Rounds of the interleaved passes whose per-round ratios are held to the bounds: single rounds on the shared VM
# ranged 0.8-3.4x around a median near 2 (8 MB, cold and warm), so the median needs several.
REFERENCE_ROUNDS = 9
OVERHEAD_ROUNDS = 11
# Bounds on the median per-round ratio to the plain loop, generous for a shared machine's noise. Measured: faithful
# 1.0-1.2 and decomposed 1.1-1.6 on the 256 MB and 1 GB checkpoints (reports/benchmarks/README.md, 2026-11-30);
# faithful 1.1-1.35 and decomposed 1.5-2.4 on --benchmark-disable's 8 MB ones, whose small tensors make per-tensor
# costs weigh most (the decomposed pass also touches every page before timing its copy), on a busy 2-core VM
# (2026-12). A faithful pass as slow as a second load, or a decomposed one well past that, fails.
FAITHFUL_WITHIN = 2.0
DECOMPOSED_WITHIN = 3.5
# The overhead benchmark's device: CPU by default (host copies stand in for H2D); CKPTPROF_BENCH_DEVICE=cuda:0 on a
# GPU machine. CKPTPROF_BENCH_CKPT=DIR adds a run on that checkpoint (e.g. the 4.7 GB H200 one).
DEVICE = torch.device(os.environ.get("CKPTPROF_BENCH_DEVICE", "cpu"))
EXTERNAL = os.environ.get("CKPTPROF_BENCH_CKPT", "")


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Every pass copies with one torch thread, as a rank does (loader/worker.py, after SGLang): two threads on a
    busy 2-core machine made one pass 3 ms and the next 160 ms, by whether the copy threads had to wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _context(plan: ReplayPlan, decompose: bool) -> LoadContext:
    ctx = LoadContext(rank=0, tp=plan.tp, device=DEVICE, decompose=decompose)
    for model in plan.models:
        ctx.allocate(model)
    return ctx


def _copy_timer() -> HostCopyTimer | CudaCopyTimer:
    return CudaCopyTimer(DEVICE) if DEVICE.type == "cuda" else HostCopyTimer()


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)  # a round ends when its copies have landed


def replay_instrumented(plan: ReplayPlan, ctx: LoadContext, faithful: bool) -> Recorder:
    cls = WallOnlyRecorder if faithful else Recorder
    rec = cls(copy_timer=_copy_timer())
    rec.start()
    for model in plan.models:
        with rec.model(model.role):
            SGLang().load_model(ctx, model, rec)
    return rec


def paired_ratio(times: dict[str, list[float]], name: str, reference: str = "plain") -> float:
    """The median over rounds of ``name``'s time over ``reference``'s in the same round."""
    return statistics.median(t / max(r, 1e-9) for t, r in zip(times[name], times[reference], strict=True))


def assert_recorded_every_shard(rec: Recorder, plan: ReplayPlan) -> None:
    """Counted, not timed: every shard of the plan recorded once, ok, and (TP1) every tensor byte of it read."""
    (model,) = plan.models
    shards = rec.models[0].shards
    assert sorted(s.file for s in shards) == sorted(Path(s.path).name for s in model.shards)
    assert all(s.status == "ok" for s in shards), [s.error for s in shards if s.error]
    assert sum(s.bytes for s in shards) == sum(read_header(s.path).tensor_bytes for s in model.shards)


def replay_plain(plan: ReplayPlan, ctx: LoadContext) -> None:
    """SGLang's loop with no recorder, no counters, no residency checks: the baseline."""
    for model in plan.models:
        for shard in model.shards:
            with ExitStack() as stack:
                handle = stack.enter_context(safe_open(shard.path, framework="pt", device="cpu"))
                for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                    full = handle.get_tensor(name)
                    src = ctx.narrow(model.role, name, full)
                    if src is not None:
                        ctx.copy(model.role, name, src)


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_replay_throughput(benchmark: BenchmarkFixture, bench_checkpoint: Path, cache: str) -> None:
    plan = build_plan(bench_checkpoint, tp=1, devices="cpu", cache=cache)
    ctx = _context(plan, decompose=True)
    files = plan.models[0].files

    def setup() -> None:
        if cache == "cold":
            fs.drop_cache(files)
        else:
            fs.warm_cache(files)

    # The reference, timed alongside: SGLang's loop with no recorder, the cache prepared the same way before each
    # pass, the two passes in turn (which goes first alternates from round to round).
    ctx_plain = _context(plan, decompose=False)
    runs = {
        "decomposed": lambda: replay_instrumented(plan, ctx, faithful=False),
        "plain": lambda: replay_plain(plan, ctx_plain),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(REFERENCE_ROUNDS):
        for name in list(runs)[:: 1 if i % 2 else -1]:
            setup()
            t0 = time.perf_counter()
            runs[name]()
            _sync()
            times[name].append(time.perf_counter() - t0)
    rec = benchmark.pedantic(
        lambda: replay_instrumented(plan, ctx, faithful=False),
        setup=setup,
        rounds=1 if benchmark.disabled else ROUNDS,
        iterations=1,
    )
    total = plan.models[0].total_bytes
    shards = rec.models[0].shards
    storage = sum(s.storage_bytes for s in shards)
    ratio = paired_ratio(times, "decomposed")
    info = {
        "bytes": total,
        "cache": cache,
        "GBps_last_round": round(total / rec.models[0].wall_s / 1e9, 3),
        "read_s": round(sum(s.read_s for s in shards), 4),
        "deserialize_s": round(sum(s.deserialize_s for s in shards), 4),
        "h2d_stand_in_s": round(sum(s.h2d_s for s in shards), 4),
        "storage_bytes": storage,
        "decomposed_over_plain": round(ratio, 3),
    }
    benchmark.extra_info.update(info)
    assert_recorded_every_shard(rec, plan)
    # Counted: a warm pass fetches (almost) nothing from storage; a cold one fetches its checkpoint once, where the
    # kernel counts this file system's reads (it counts none on tmpfs and some network file systems)
    if cache == "warm":
        assert storage <= 0.01 * total, info
    elif storage > 0:
        assert 0.9 * total <= storage <= 1.1 * total, info
    assert ratio <= DECOMPOSED_WITHIN, info


@pytest.mark.parametrize("size", ["256MB-64-shards", "1GB-16-shards", "external"])
def test_instrumentation_overhead(
    benchmark: BenchmarkFixture, request: pytest.FixtureRequest, size: str
) -> None:
    """Warm cache, interleaved rounds: plain loop vs the faithful (wall-only) recorder vs the decomposed one.

    Two checkpoints: many small shards (the worst case for per-shard costs) and fewer, larger ones (closer to
    the H200 runs' 73 MB shards); a third from CKPTPROF_BENCH_CKPT when set."""
    if size == "external":
        if not EXTERNAL:
            pytest.skip("set CKPTPROF_BENCH_CKPT to a checkpoint directory to measure the overhead on it")
        root = Path(EXTERNAL)
    else:
        root = request.getfixturevalue(
            "bench_checkpoint" if size.startswith("256MB") else "bench_checkpoint_large"
        )
    plan = build_plan(root, tp=1, devices=str(DEVICE), cache="warm")
    fs.warm_cache(plan.models[0].files)
    # The faithful pass runs SGLang's sequence (no page touching): its context must not decompose.
    ctx_plain = _context(plan, decompose=False)
    ctx_decomposed = _context(plan, decompose=True)
    times: dict[str, list[float]] = {"plain": [], "faithful": [], "decomposed": []}
    runs = {
        "plain": lambda: replay_plain(plan, ctx_plain),
        "faithful": lambda: replay_instrumented(plan, ctx_plain, faithful=True),
        "decomposed": lambda: replay_instrumented(plan, ctx_decomposed, faithful=False),
    }
    rounds = OVERHEAD_ROUNDS  # cheap on the 8 MB checkpoints of --benchmark-disable; a median needs rounds
    order = list(runs)
    shuffle = random.Random(
        0
    ).shuffle  # a new order each round, the same across runs: no variant always goes first
    for _ in range(rounds):
        shuffle(order)
        for name in order:
            fn = runs[name]
            t0 = time.perf_counter()
            fn()
            _sync()
            times[name].append(time.perf_counter() - t0)
    rec = benchmark.pedantic(runs["decomposed"], rounds=1, iterations=1)
    assert isinstance(rec, Recorder)
    assert_recorded_every_shard(rec, plan)
    assert_recorded_every_shard(replay_instrumented(plan, ctx_plain, faithful=True), plan)
    plain = statistics.median(times["plain"])
    shards = plan.models[0].shards
    info = {
        "bytes": plan.models[0].total_bytes,
        "shards": len(shards),
        "device": str(DEVICE),
        "plain_s": round(plain, 4),
        "plain_ms_per_shard": round(1e3 * plain / len(shards), 3),
        "faithful_over_plain": round(statistics.median(times["faithful"]) / plain, 3),
        "decomposed_over_plain": round(statistics.median(times["decomposed"]) / plain, 3),
        "faithful_over_plain_paired": round(paired_ratio(times, "faithful"), 3),
        "decomposed_over_plain_paired": round(paired_ratio(times, "decomposed"), 3),
    }
    benchmark.extra_info.update(info)
    assert info["faithful_over_plain_paired"] <= FAITHFUL_WITHIN, info
    assert info["decomposed_over_plain_paired"] <= DECOMPOSED_WITHIN, info
