"""Can the copy engine read a warm page cache directly? (issue 7: warm `pipelined` >= 30 GB/s)

Compares, on the same warm files and GPU, alternating rounds:
- ``pread-pinned``: T threads pread 64 MiB chunks into pinned buffers (two per thread) and copy them to the device
  asynchronously: the CPU copies every byte once (page cache -> pinned), the copy engine once more;
- ``register``: T threads map each file read-only, ``cudaHostRegister`` (read-only) a chunk of the mapping, copy it
  to the device straight from the page cache, then unregister: no CPU copy, but pinning costs per page;
- ``register-only``: the registration and unregistration alone (what ``register`` pays on top of the DMA);
- ``pread-only``: the page-cache read ceiling with the same threads and buffers, no device copy;
- ``h2d-pinned``: one pinned buffer copied repeatedly (the PCIe ceiling).

Usage on the device machine (repository root), METHODS and ROUNDS optional:
    METHODS=pread-pinned,pread-only ROUNDS=3 python3 reports/h200/hostreg_probe.py DIR [THREADS...] > out.json
"""

from __future__ import annotations

import json
import mmap
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

CHUNK = 64 * 1024 * 1024
PAGE = mmap.PAGESIZE
REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly
ROUNDS = int(os.environ.get("ROUNDS", "3"))
METHODS = os.environ.get("METHODS", "pread-pinned,register,register-only,pread-only").split(",")


def chunks(files: list[Path]) -> list[tuple[Path, int, int]]:
    out = []
    for f in files:
        size = f.stat().st_size
        out += [(f, off, min(CHUNK, size - off)) for off in range(0, size, CHUNK)]
    return out


def run_threads(n: int, work: list, body: Callable[[int, list], None]) -> float:
    parts = [work[i::n] for i in range(n)]
    threads = [threading.Thread(target=body, args=(i, parts[i])) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def pread_pinned(n: int, work: list, dev: torch.Tensor, h2d: bool) -> float:
    bufs = [[torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True) for _ in range(2)] for _ in range(n)]
    streams = [torch.cuda.Stream() for _ in range(n)]
    lock = threading.Lock()

    def body(i: int, mine: list) -> None:
        events: list = [None, None]
        for k, (path, off, length) in enumerate(mine):
            slot = k % 2
            if events[slot] is not None:
                events[slot].synchronize()
            host = bufs[i][slot]
            with open(path, "rb", buffering=0) as fh:
                got = os.preadv(fh.fileno(), [host.numpy()[:length].data], off)
            assert got == length
            if h2d:
                with lock, torch.cuda.stream(streams[i]):
                    dev[:length].copy_(host[:length], non_blocking=True)
                    events[slot] = torch.cuda.Event()
                    events[slot].record(streams[i])

    return run_threads(n, work, body)


def register(n: int, work: list, dev: torch.Tensor, h2d: bool, errors: list[str]) -> float:
    cudart = torch.cuda.cudart()
    maps: dict[Path, tuple[mmap.mmap, torch.Tensor, int]] = {}
    for path in {w[0] for w in work}:
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        host = torch.frombuffer(mm, dtype=torch.uint8)
        maps[path] = (mm, host, host.data_ptr())
    streams = [torch.cuda.Stream() for _ in range(n)]
    lock = threading.Lock()

    def body(i: int, mine: list) -> None:
        pending: list = []  # (event, ptr) of registrations whose copies are in flight
        for path, off, length in mine:
            _, host, base = maps[path]
            start = off - off % PAGE
            size = -(-(off + length - start) // PAGE) * PAGE
            err = cudart.cudaHostRegister(base + start, size, REGISTER_READ_ONLY)
            if int(err) != 0:
                errors.append(f"register {path.name}@{off}: {err}")
                return
            event = None
            if h2d:
                with lock, torch.cuda.stream(streams[i]):
                    dev[:length].copy_(host[off : off + length], non_blocking=True)
                    event = torch.cuda.Event()
                    event.record(streams[i])
            pending.append((event, base + start))
            while len(pending) > 2:
                ev, ptr = pending.pop(0)
                if ev is not None:
                    ev.synchronize()
                cudart.cudaHostUnregister(ptr)
        for ev, ptr in pending:
            if ev is not None:
                ev.synchronize()
            cudart.cudaHostUnregister(ptr)

    return run_threads(
        n, work, body
    )  # the maps close when collected (tensor views keep them open until then)


def h2d_pinned(dev: torch.Tensor) -> float:
    host = torch.empty(CHUNK * 4, dtype=torch.uint8, pin_memory=True).random_(0, 255)
    big = torch.empty(CHUNK * 4, dtype=torch.uint8, device=dev.device)
    big.copy_(host)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        big.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    return host.numel() * 20 / (time.perf_counter() - t0) / 1e9


def main() -> None:
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    root = Path(sys.argv[1])
    threads = [int(t) for t in sys.argv[2:]] or [8, 16]
    files = sorted(root.glob("*.safetensors"))
    total = sum(f.stat().st_size for f in files)
    for f in files:  # warm the page cache
        with open(f, "rb") as fh:
            while fh.read(1 << 26):
                pass
    work = chunks(files)
    dev = torch.empty(CHUNK, dtype=torch.uint8, device="cuda:0")
    gpu = torch.cuda.get_device_properties(0).name
    result: dict = {"bytes": total, "files": len(files), "chunk_mib": CHUNK >> 20, "gpu": gpu}
    errors: list[str] = []
    result["h2d_pinned_gbps"] = round(h2d_pinned(dev), 2)
    runs: dict[str, list[float]] = {}
    for r in range(ROUNDS):
        for n in threads:
            for name, fn in (
                m
                for m in (
                    ("pread-pinned", lambda n=n: pread_pinned(n, work, dev, True)),
                    ("register", lambda n=n: register(n, work, dev, True, errors)),
                    ("register-only", lambda n=n: register(n, work, dev, False, errors)),
                    ("pread-only", lambda n=n: pread_pinned(n, work, dev, False)),
                )
                if m[0] in METHODS
            ):
                key = f"{name}/{n}"
                try:
                    secs = fn()
                except Exception as exc:  # report, keep measuring the others
                    errors.append(f"{key}: {exc!r}")
                    continue
                runs.setdefault(key, []).append(round(total / secs / 1e9, 2))
                print(f"round {r} {key}: {runs[key][-1]} GB/s", file=sys.stderr, flush=True)
    result["gbps"] = {k: {"median": statistics.median(v), "all": v} for k, v in runs.items()}
    result["errors"] = errors[:20]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
