"""Replay throughput (warm and cold) and the instrumentation's overhead against an uninstrumented loop.

Overhead is measured side by side in one run, rounds interleaved, so machine noise hits both alike: the ratios
(instrumented / uninstrumented, medians) are in ``extra_info``. Run with ``pytest benchmarks --benchmark-autosave``;
figures for this project's machines are recorded under reports/.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture
from safetensors import safe_open

from ckptprof.checkpoint import fs
from ckptprof.loader.copytimers import CudaCopyTimer, HostCopyTimer
from ckptprof.loader.plan import ReplayPlan, build_plan
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.strategies.sglang import SGLangMmap

ROUNDS = 5
# The overhead benchmark's device: CPU by default (host copies stand in for H2D); CKPTPROF_BENCH_DEVICE=cuda:0 on a
# GPU machine. CKPTPROF_BENCH_CKPT=DIR adds a run on that checkpoint (e.g. the 4.7 GB H200 one).
DEVICE = torch.device(os.environ.get("CKPTPROF_BENCH_DEVICE", "cpu"))
EXTERNAL = os.environ.get("CKPTPROF_BENCH_CKPT", "")


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
            SGLangMmap().load_model(ctx, model, rec)
    return rec


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

    rec = benchmark.pedantic(
        lambda: replay_instrumented(plan, ctx, faithful=False), setup=setup, rounds=ROUNDS, iterations=1
    )
    total = plan.models[0].total_bytes
    shards = rec.models[0].shards
    benchmark.extra_info.update(
        {
            "bytes": total,
            "cache": cache,
            "GBps_last_round": round(total / rec.models[0].wall_s / 1e9, 3),
            "read_s": round(sum(s.read_s for s in shards), 4),
            "deserialize_s": round(sum(s.deserialize_s for s in shards), 4),
            "h2d_stand_in_s": round(sum(s.h2d_s for s in shards), 4),
        }
    )


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
    rounds = 1 if benchmark.disabled else 11
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
    benchmark.pedantic(runs["decomposed"], rounds=1, iterations=1)
    plain = statistics.median(times["plain"])
    shards = plan.models[0].shards
    benchmark.extra_info.update(
        {
            "bytes": plan.models[0].total_bytes,
            "shards": len(shards),
            "device": str(DEVICE),
            "plain_s": round(plain, 4),
            "plain_ms_per_shard": round(1e3 * plain / len(shards), 3),
            "faithful_over_plain": round(statistics.median(times["faithful"]) / plain, 3),
            "decomposed_over_plain": round(statistics.median(times["decomposed"]) / plain, 3),
        }
    )
