"""Where `pipelined` loses time warm (issue 20 item 1): the page cache read into which kind of host memory?

The floor is min(page-cache read with N threads, pinned H2D). The probe reads the page cache into a 16 MiB
bytearray per thread, reused; `pipelined` reads it into a ring of pinned 64 MiB buffers (torch's pin_memory, i.e.
cudaHostAlloc), then copies them to the device. This reads the same warm files with the same threads into:

- ``bytearray-16M``: the probe's buffers;
- ``pinned-64M-ring``: torch pinned buffers, a ring of threads + 4, as `pipelined` uses them;
- ``anon-64M-ring``: anonymous mappings, 4 KiB pages (MADV_NOHUGEPAGE), registered with cudaHostRegister;
- ``thp-64M-ring``: anonymous mappings with transparent huge pages (MADV_HUGEPAGE), registered likewise;

and, for the two registered rings and the pinned one, the same reads with each buffer copied to the device on one
side stream (the pipeline itself). Rounds alternate; the median of ROUNDS is printed as JSON.

Usage on the device machine: ROUNDS=3 THREADS=16 python3 reports/h200/pinned_thp_diag.py CKPT_DIR
"""

from __future__ import annotations

import json
import mmap
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

CHUNK = 64 << 20
_MAPPINGS: list[mmap.mmap] = []  # the registered rings' memory, alive as long as the tensors that view it


def chunks(files: list[Path]) -> list[tuple[Path, int, int]]:
    out = []
    for path in files:
        size = path.stat().st_size
        out.extend((path, offset, min(CHUNK, size - offset)) for offset in range(0, size, CHUNK))
    return out


def register(buf: mmap.mmap) -> torch.Tensor:
    tensor = torch.frombuffer(buf, dtype=torch.uint8)
    code = torch.cuda.cudart().cudaHostRegister(tensor.data_ptr(), len(buf), 0)
    if int(code) != 0:
        raise RuntimeError(f"cudaHostRegister failed: {code}")
    return tensor


def ring(kind: str, count: int) -> list[torch.Tensor]:
    if kind == "pinned":
        return [torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True) for _ in range(count)]
    bufs = []
    for _ in range(count):
        m = mmap.mmap(-1, CHUNK)
        m.madvise(mmap.MADV_HUGEPAGE if kind == "thp" else mmap.MADV_NOHUGEPAGE)
        m.write(
            b"\0" * CHUNK
        )  # fault it in now (huge pages where granted), as a ring made before the load is
        m.seek(0)
        _MAPPINGS.append(m)
        bufs.append(register(m))
    return bufs


def run(work: list[tuple[Path, int, int]], threads: int, pool: list[torch.Tensor], copy: bool) -> float:
    """GB/s of reading ``work`` with ``threads`` into buffers taken from ``pool`` (copied to cuda:0 if ``copy``)."""
    fds = {p: os.open(p, os.O_RDONLY) for p in {w[0] for w in work}}
    free: list[int] = list(range(len(pool)))
    events: dict[int, Any] = {}
    lock = threading.Lock()
    cond = threading.Condition(lock)
    stream = torch.cuda.Stream() if copy else None
    dest = torch.empty(CHUNK, dtype=torch.uint8, device="cuda:0") if copy else None
    items = iter(work)

    def take() -> int:
        with cond:
            while not free:
                cond.wait()
            idx = free.pop()
        event = events.pop(idx, None)
        if event is not None:
            event.synchronize()
        return idx

    def worker() -> None:
        torch.cuda.set_device(0)
        while True:
            with lock:
                item = next(items, None)
            if item is None:
                return
            path, offset, length = item
            idx = take()
            host = pool[idx].numpy()
            got = os.preadv(fds[path], [host[:length].data], offset)
            assert got == length
            if copy:
                assert stream is not None and dest is not None
                with lock, torch.cuda.stream(stream):
                    dest[:length].copy_(pool[idx][:length], non_blocking=True)
                    event = torch.cuda.Event()
                    event.record(stream)
                    events[idx] = event
            with cond:
                free.append(idx)
                cond.notify()

    total = sum(w[2] for w in work)
    pool_threads = [threading.Thread(target=worker) for _ in range(threads)]
    began = time.perf_counter()
    for t in pool_threads:
        t.start()
    for t in pool_threads:
        t.join()
    if stream is not None:
        stream.synchronize()
    seconds = time.perf_counter() - began
    for fd in fds.values():
        os.close(fd)
    return total / seconds / 1e9


def bytearray_run(work: list[tuple[Path, int, int]], threads: int) -> float:
    """The probe's way: each thread its own 16 MiB bytearray, reused."""
    fds = {p: os.open(p, os.O_RDONLY) for p in {w[0] for w in work}}
    block = 16 << 20
    pieces = [(p, o + s, min(block, n - s)) for p, o, n in work for s in range(0, n, block)]
    items = iter(pieces)
    lock = threading.Lock()

    def worker() -> None:
        buf = bytearray(block)
        view = memoryview(buf)
        while True:
            with lock:
                item = next(items, None)
            if item is None:
                return
            path, offset, length = item
            os.preadv(fds[path], [view[:length]], offset)

    total = sum(w[2] for w in work)
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    began = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - began
    for fd in fds.values():
        os.close(fd)
    return total / seconds / 1e9


def main(ckpt: str) -> None:
    files = sorted(Path(ckpt).glob("*.safetensors"))
    work = chunks(files)
    threads = int(os.environ.get("THREADS", "16"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    for path in files:  # warm: every page in the page cache
        with path.open("rb") as fh:
            while fh.read(CHUNK):
                pass
    pools = {kind: ring(kind, threads + 4) for kind in ("pinned", "anon", "thp")}
    methods: dict[str, Callable[[], float]] = {"bytearray-16M": lambda: bytearray_run(work, threads)}
    for kind, pool in pools.items():
        methods[f"{kind}-64M-ring"] = lambda pool=pool: run(work, threads, pool, copy=False)
        methods[f"{kind}-64M-ring+h2d"] = lambda pool=pool: run(work, threads, pool, copy=True)
    rates: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds):
        for name, method in methods.items():
            rates[name].append(method())
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(
        json.dumps(
            {
                "bytes": sum(w[2] for w in work),
                "threads": threads,
                "transparent_hugepage": thp.read_text().strip() if thp.exists() else None,
                "GBps_median": {name: round(statistics.median(r), 2) for name, r in rates.items()},
                "GBps_all": {name: [round(x, 2) for x in r] for name, r in rates.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
