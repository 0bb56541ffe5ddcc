"""Host-to-device ceilings: pageable and pinned H2D per CUDA device and on all devices at once; D2H for reference.

Per-device figures are timed with CUDA events around one large copy (>= 256 MiB by default), the median of
several repeats after a warm-up. The all-devices figure cannot use events (events of different devices cannot
be compared), so it runs one thread per device, releases them together, and divides all bytes by the wall
from the release to the last device's synchronize: that is what N ranks loading at once can get through the
host's PCIe root complexes and memory.

torch is imported lazily so importing this module costs nothing on machines that only read logs.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptprof.units import GB

if TYPE_CHECKING:
    import torch

MiB = 1024 * 1024
DEFAULT_TRANSFER_BYTES = 256 * MiB
DEFAULT_REPEATS = 5
DEFAULT_WARMUP = 2

NO_CUDA_NOTE = "no CUDA device: host-to-device ceilings not measured"

Clock = Callable[[], float]


# -- pure helpers (unit-tested on CPU) --------------------------------------------------------------------------


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / GB if seconds > 0 else 0.0


def median_rate(nbytes: int, seconds: Sequence[float]) -> float:
    """GB/s of the median time (not the mean rate: one slow repeat must not drag the ceiling down)."""
    valid = [s for s in seconds if s > 0]
    if not valid:
        return 0.0
    return gbps(nbytes, statistics.median(valid))


def aggregate_rate(nbytes_per_device: int, rounds: Sequence[Sequence[tuple[float, float]]]) -> float:
    """Aggregate GB/s of simultaneous copies: per round, all devices' bytes over (last end - first start).

    ``rounds[r][d]`` is (start, end) of device d in round r on one host clock; the median round is kept.
    """
    times: list[float] = []
    for spans in rounds:
        if not spans:
            continue
        wall = max(end for _, end in spans) - min(start for start, _ in spans)
        times.append(wall)
    if not times:
        return 0.0
    ndev = len(rounds[0])
    return median_rate(nbytes_per_device * ndev, times)


def empty_result(notes: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "h2d_pageable_GBps": {},
        "h2d_pinned_GBps": {},
        "d2h_pinned_GBps": {},
        "h2d_pinned_all_devices_GBps": None,
        "h2d_pageable_all_devices_GBps": None,
        "h2d_pinned_concurrent_GBps": {},
        "h2d_transfer_bytes": None,
        "notes": list(notes),
    }


def _r(x: float) -> float:
    return round(x, 3)


# -- CUDA measurements ------------------------------------------------------------------------------------------


@dataclass
class _Buffers:
    """Host and device buffers of one device, allocated once and reused by every measurement."""

    device: str
    host_pageable: torch.Tensor
    host_pinned: torch.Tensor
    dev: torch.Tensor


def _alloc(device: str, nbytes: int) -> _Buffers:
    import torch

    # Filled, not just allocated: untouched pageable memory would add first-touch page faults to the copy.
    pageable = torch.ones(nbytes, dtype=torch.uint8)
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    pinned.fill_(1)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return _Buffers(device, pageable, pinned, dev)


def _event_times(device: str, copy: Callable[[], None], repeats: int, warmup: int) -> list[float]:
    """Seconds per copy measured with CUDA events on the device's current stream."""
    import torch

    with torch.cuda.device(device):
        stream = torch.cuda.current_stream()
        for _ in range(warmup):
            copy()
        torch.cuda.synchronize()
        times: list[float] = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            copy()
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000.0)
    return times


def _h2d(buf: _Buffers, pinned: bool) -> Callable[[], None]:
    src = buf.host_pinned if pinned else buf.host_pageable

    def copy() -> None:
        # Pinned copies are asynchronous DMA; pageable ones go through the driver's staging buffers and
        # block the host anyway, so non_blocking would change nothing for them.
        buf.dev.copy_(src, non_blocking=pinned)

    return copy


def _d2h(buf: _Buffers) -> Callable[[], None]:
    def copy() -> None:
        buf.host_pinned.copy_(buf.dev, non_blocking=True)

    return copy


def measure_device(
    buf: _Buffers, repeats: int = DEFAULT_REPEATS, warmup: int = DEFAULT_WARMUP
) -> dict[str, float]:
    """One device alone: H2D pageable, H2D pinned and D2H pinned, GB/s."""
    nbytes = buf.dev.numel()
    return {
        "h2d_pageable": median_rate(nbytes, _event_times(buf.device, _h2d(buf, False), repeats, warmup)),
        "h2d_pinned": median_rate(nbytes, _event_times(buf.device, _h2d(buf, True), repeats, warmup)),
        "d2h_pinned": median_rate(nbytes, _event_times(buf.device, _d2h(buf), repeats, warmup)),
    }


def measure_all_devices(
    bufs: Sequence[_Buffers],
    pinned: bool,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    clock: Clock = time.perf_counter,
) -> tuple[float, dict[str, float]]:
    """All devices copying at once, one thread each; returns (aggregate GB/s, per-device GB/s under load)."""
    import torch

    nbytes = bufs[0].dev.numel()
    rounds = warmup + repeats
    barrier = threading.Barrier(len(bufs))
    spans: list[list[tuple[float, float]]] = [[(0.0, 0.0)] * len(bufs) for _ in range(rounds)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        buf = bufs[i]
        copy = _h2d(buf, pinned)
        try:
            with torch.cuda.device(buf.device):
                for r in range(rounds):
                    torch.cuda.synchronize()
                    barrier.wait()
                    t0 = clock()
                    copy()  # torch releases the GIL inside copy_, so the devices' copies overlap
                    torch.cuda.synchronize()
                    spans[r][i] = (t0, clock())
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()  # release the other threads instead of leaving them waiting forever

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(bufs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        raise first
    timed = spans[warmup:]
    per_device = {
        buf.device: median_rate(nbytes, [r[i][1] - r[i][0] for r in timed]) for i, buf in enumerate(bufs)
    }
    return aggregate_rate(nbytes, timed), per_device


def cuda_devices(devices: Sequence[str]) -> list[str]:
    return [d for d in devices if d.startswith("cuda")]


def measure_transfer(
    devices: Sequence[str],
    nbytes: int = DEFAULT_TRANSFER_BYTES,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """H2D/D2H ceilings for the CUDA devices among ``devices`` (others are ignored)."""
    say = log or (lambda _msg: None)
    wanted = cuda_devices(devices)
    if not wanted or not _cuda_available():
        return empty_result([NO_CUDA_NOTE])
    import torch

    out = empty_result()
    out["h2d_transfer_bytes"] = nbytes
    bufs: list[_Buffers] = []
    try:
        for dev in wanted:
            bufs.append(_alloc(dev, nbytes))
        for buf in bufs:
            say(f"h2d: {buf.device} pageable, pinned, d2h")
            rates = measure_device(buf, repeats, warmup)
            out["h2d_pageable_GBps"][buf.device] = _r(rates["h2d_pageable"])
            out["h2d_pinned_GBps"][buf.device] = _r(rates["h2d_pinned"])
            out["d2h_pinned_GBps"][buf.device] = _r(rates["d2h_pinned"])
        say(f"h2d: {len(bufs)} device(s) at once")
        agg_pinned, concurrent = measure_all_devices(bufs, True, repeats, warmup)
        agg_pageable, _ = measure_all_devices(bufs, False, repeats, warmup)
        out["h2d_pinned_all_devices_GBps"] = _r(agg_pinned)
        out["h2d_pageable_all_devices_GBps"] = _r(agg_pageable)
        out["h2d_pinned_concurrent_GBps"] = {k: _r(v) for k, v in concurrent.items()}
    except torch.cuda.OutOfMemoryError as exc:
        out["notes"].append(f"out of device memory for {nbytes} byte transfers: {str(exc).splitlines()[0]}")
    finally:
        bufs.clear()
        torch.cuda.empty_cache()
    return out


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
