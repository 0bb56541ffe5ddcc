"""Diagnostics for pipelined-shared on one GPU: is the shared memory pinned, how fast are copies out of it, and
where a TP1 warm load's main thread spends its time. Usage: python3 reports/h200/shared_diag.py CHECKPOINT"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from ckptprof.checkpoint import fs
from ckptprof.loader.copytimers import CudaCopyTimer
from ckptprof.loader.plan import plan_model
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.sharedmem import SharedRegion
from ckptprof.loader.strategies import get_strategy
from ckptprof.loader.strategies.base import LoadContext


def h2d_rate(src: torch.Tensor, dst: torch.Tensor, rounds: int = 20) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(rounds):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return src.numel() * rounds / (time.perf_counter() - t) / 1e9


def read_rate(files: list[Any]) -> None:
    """16 threads reading the (cached) files in 64 MiB preads into pin_memory buffers vs into shared memory."""
    chunk = 64 << 20
    jobs = [(str(f), off) for f in files for off in range(0, os.path.getsize(f), chunk)]
    total = sum(min(chunk, os.path.getsize(path) - off) for path, off in jobs)
    shared = SharedRegion.create("diag-read", 16 * chunk)
    assert shared.tensor is not None
    shared.tensor.zero_()
    shared.pin()
    targets = {
        "pin_memory": [torch.empty(chunk, dtype=torch.uint8, pin_memory=True) for _ in range(16)],
        "shared memory": [shared.tensor[i * chunk : (i + 1) * chunk] for i in range(16)],
    }
    for label, buffers in targets.items():
        arrays = [b.numpy() for b in buffers]

        def work(i: int, arrays: list[Any] = arrays) -> None:
            for path, off in jobs[i::16]:
                fd = os.open(path, os.O_RDONLY)
                os.preadv(fd, [arrays[i].data], off)
                os.close(fd)

        t = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(work, range(16)))
        print(f"page cache -> {label:14s} {total / (time.perf_counter() - t) / 1e9:6.1f} GB/s (16 threads)")
    shared.close()


def main(ckpt: str) -> None:
    size = 256 << 20
    region = SharedRegion.create("diag", size)
    assert region.tensor is not None
    region.tensor.zero_()
    pinned = region.pin()
    print("registered:", pinned, "is_pinned:", region.tensor.is_pinned())
    dst = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0")
    print(f"H2D from shared memory  {h2d_rate(region.tensor[: 64 << 20], dst):6.1f} GB/s")
    print(
        f"H2D from pin_memory     {h2d_rate(torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True), dst):6.1f} GB/s"
    )
    print(f"H2D from pageable       {h2d_rate(torch.zeros(64 << 20, dtype=torch.uint8), dst):6.1f} GB/s")
    region.close()
    for knob in ("enabled", "shmem_enabled"):
        with open(f"/sys/kernel/mm/transparent_hugepage/{knob}", encoding="ascii") as src:
            print(f"transparent_hugepage/{knob}: {src.read().strip()}")
    model = plan_model("target", ckpt)
    fs.warm_cache(model.files)
    read_rate(model.files)
    fs.warm_cache(model.files)
    for name in ("pipelined", "pipelined-shared", "pipelined-shared:slots=8:readers=32"):
        strat, *kv = name.split(":")
        params = {k: int(v) for k, v in (p.split("=") for p in kv)}
        ctx = LoadContext(rank=0, tp=1, device=torch.device("cuda:0"))
        ctx.allocate(model)
        strategy = get_strategy(strat, **params)
        strategy.prepare(
            ctx,
            type("P", (), {"models": [model], "run_id": f"diag-{strat}", "tp": 1, "devices": ["cuda:0"]})(),
        )
        rec = Recorder(copy_timer=CudaCopyTimer(torch.device("cuda:0")))
        rec.start()
        prof = cProfile.Profile()
        torch.cuda.synchronize()
        t = time.perf_counter()
        prof.enable()
        with rec.model("target"):
            strategy.load_model(ctx, model, rec)
        torch.cuda.synchronize()
        prof.disable()
        print(f"{name}: {time.perf_counter() - t:.3f} s warm TP1 in-process")
        strategy.close()
        pstats.Stats(prof).sort_stats("tottime").print_stats(8)
        del ctx


if __name__ == "__main__":
    main(sys.argv[1])
