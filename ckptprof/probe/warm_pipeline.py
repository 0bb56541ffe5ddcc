"""The warm ceiling of a loader that copies through host memory: the page cache read into pinned buffers and copied
to the device, both at once.

The page-cache read and the pinned H2D copy are each measured alone; min(page cache, H2D) is not what a loader can
reach with both running, because both use the host's memory: the CPU copy out of the page cache reads and writes
every byte, the DMA reads it once more, so together they reach less than the slower of the two alone (the figures:
reports/h200/2026-12-01f-h200-warm-floor-memory-bandwidth). This probe measures that combined rate directly:
``threads`` threads read a warm sample of the checkpoint, ``CHUNK_BYTES`` at a time, into a ring of pinned buffers,
and each filled buffer is copied to the device on a side stream; a buffer is reused once its
copy finished. With several devices (ranks spread over GPUs) the buffers go to them in turn, each on its own
stream: the host's memory then feeds every link the load uses at once. The same loop on a CPU device copies into
host memory instead (what the tests run).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
import torch

CHUNK_BYTES = 64 << 20
# Long enough that the pass's fixed costs are noise (a 1 GiB pass read below the loader it should bound).
SAMPLE_CAP_BYTES = 4 << 30
THREADS = 16  # pipelined's readers for one rank
EXTRA_BUFFERS = 4  # buffers beyond one per thread: copies in flight while every thread reads
REPEATS = 3


def sample_chunks(paths: Sequence[Path], cap: int) -> list[tuple[Path, int, int]]:
    """(file, offset, length) pieces of at most CHUNK_BYTES covering the first ``cap`` bytes of ``paths``."""
    out: list[tuple[Path, int, int]] = []
    left = cap
    for path in paths:
        try:
            size = min(path.stat().st_size, left)
        except OSError:
            continue
        out.extend((path, offset, min(CHUNK_BYTES, size - offset)) for offset in range(0, size, CHUNK_BYTES))
        left -= size
        if left <= 0:
            break
    return out


def device_of_chunk(index: int, devices: Sequence[torch.device]) -> torch.device:
    """The device the ``index``-th chunk is copied to: the devices in turn, as ranks spread over them copy."""
    return devices[index % len(devices)]


class _Target:
    """One device's side of the pass: where its copies land, the stream they run on, one issuer at a time."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.dest = torch.empty(CHUNK_BYTES, dtype=torch.uint8, device=device)
        self.issue = threading.Lock()

    def copy(self, buf: torch.Tensor, length: int) -> Any:
        """Copy ``buf[:length]`` in; the event that marks its end on a GPU, None on the CPU (done already)."""
        with self.issue:
            if self.stream is None:
                self.dest[:length].copy_(buf[:length])
                return None
            with torch.cuda.stream(self.stream):
                self.dest[:length].copy_(buf[:length], non_blocking=True)
                event = torch.cuda.Event()
                event.record(self.stream)
                return event


def _one_pass(
    chunks: Sequence[tuple[Path, int, int]],
    fds: dict[Path, int],
    ring: list[torch.Tensor],
    devices: Sequence[torch.device],
    threads: int,
) -> float:
    """Seconds to read every chunk into the ring and copy it to its device (``device_of_chunk``)."""
    targets = {device: _Target(device) for device in dict.fromkeys(devices)}
    first = devices[0]
    free = list(range(len(ring)))
    pending: dict[int, Any] = {}  # buffer -> the event its copy records
    cond = threading.Condition()
    work = enumerate(chunks)
    errors: list[BaseException] = []

    def take() -> int:
        with cond:
            while not free:
                cond.wait()
            idx = free.pop()
            event = pending.pop(idx, None)
        if event is not None:
            event.synchronize()
        return idx

    def reader() -> None:
        try:
            if first.type == "cuda":
                torch.cuda.set_device(first)
        finally:
            with suppress(threading.BrokenBarrierError):
                ready.wait()
        try:
            while True:
                with cond:
                    item = next(work, None)
                if item is None:
                    return
                index, (path, offset, length) = item
                idx = take()
                buf = ring[idx]
                got = os.preadv(fds[path], [buf.numpy()[:length].data], offset)
                if got != length:
                    raise OSError(f"short read of {path}: {got} of {length} bytes at {offset}")
                event = targets[device_of_chunk(index, devices)].copy(buf, length)
                with cond:
                    if event is not None:
                        pending[idx] = event
                    free.append(idx)
                    cond.notify()
        except BaseException as exc:  # reported after the join: a probe never hangs on a failed reader
            errors.append(exc)
            with cond:
                free.extend(range(len(ring)))
                cond.notify_all()

    # The threads start and bind the device before the clock does, as a loader's pool is made before its load.
    ready = threading.Barrier(threads + 1)
    workers = [threading.Thread(target=reader, name=f"ckptprof-warm-pipeline-{i}") for i in range(threads)]
    for w in workers:
        w.start()
    ready.wait()
    began = time.perf_counter()
    for w in workers:
        w.join()
    for target in targets.values():
        if target.stream is not None:
            target.stream.synchronize()
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    return seconds


def measure_warm_pipeline(
    paths: Sequence[Path],
    devices: str | Sequence[str],
    threads: int = THREADS,
    cap: int = SAMPLE_CAP_BYTES,
    repeats: int = REPEATS,
) -> dict[str, Any]:
    """``warm_pipeline_GBps``: a warm sample (at most ``cap``, and a quarter of the available memory) read into pinned
    buffers and copied to ``devices`` in turn with ``threads`` threads, the best of ``repeats`` (a ceiling: what the
    host reached, on a host whose memory other tenants share); None with a note on failure."""
    cap = min(cap, psutil.virtual_memory().available // 4)
    chunks = sample_chunks(paths, cap)
    total = sum(length for _, _, length in chunks)
    names = [devices] if isinstance(devices, str) else list(devices)
    out: dict[str, Any] = {"warm_pipeline_GBps": None, "warm_pipeline_threads": threads, "notes": []}
    if not total or not names:
        return out
    targets = [torch.device(name) for name in names]
    if any(t.type == "cuda" for t in targets):
        if not torch.cuda.is_available():
            return out  # the transfer probe says so already
        targets = [
            torch.device("cuda", torch.cuda.current_device()) if t.type == "cuda" and t.index is None else t
            for t in targets
        ]
    device = ", ".join(names)
    fds = {path: os.open(path, os.O_RDONLY) for path in dict.fromkeys(p for p, _, _ in chunks)}
    try:
        pin = any(t.type == "cuda" for t in targets)
        ring = [
            torch.empty(CHUNK_BYTES, dtype=torch.uint8, pin_memory=pin)
            for _ in range(threads + EXTRA_BUFFERS)
        ]
        for path, offset, length in chunks:  # warm: the sample in the page cache, through the fds timed
            os.preadv(fds[path], [ring[0].numpy()[:length].data], offset)
        rates = [total / _one_pass(chunks, fds, ring, targets, threads) / 1e9 for _ in range(repeats)]
    except (OSError, RuntimeError) as exc:
        out["notes"].append(f"warm pipeline not measured on {device}: {exc}")
        return out
    finally:
        for fd in fds.values():
            os.close(fd)
    out["warm_pipeline_GBps"] = round(max(rates), 3)
    out["warm_pipeline_sample_bytes"] = total
    out["warm_pipeline_devices"] = len(dict.fromkeys(targets))
    return out
