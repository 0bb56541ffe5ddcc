"""Host memory ceilings: memcpy by one thread and by N, and copies into freshly allocated memory (first touch) by one
writer and by N at once."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ckptprof.probe.parallel import MOST_REPEATS, Clock, default_streams, median_rate, round3
from ckptprof.probe.sampling import MiB

MEMCPY_BYTES = 256 * MiB
FRESH_WRITER_MIN_BYTES = 64 * MiB
MEMCPY_REPEATS = 3


def measure_memcpy(
    nbytes: int = MEMCPY_BYTES,
    repeats: int = MEMCPY_REPEATS,
    threads: int | None = None,
    clock: Clock = time.perf_counter,
) -> dict[str, Any]:
    """Host memcpy ceiling: bytes copied per second (not read + written), 1 thread and N threads; and the rate of
    copies into freshly allocated memory (first touch), by one thread and by N at once (aggregate).

    One thread is what a pageable host-to-device copy's staging can use; N threads is the memory system. N fresh
    writers are N ranks each reading whole files into new buffers (``--weight-loader-disable-mmap``): their page
    faults contend in the kernel's allocator, so N of them get less than N times one.
    """
    n = threads or default_streams()
    src = np.ones(nbytes, dtype=np.uint8)  # ones, not empty: pages must exist before timing
    dst = np.zeros(nbytes, dtype=np.uint8)
    np.copyto(dst, src)  # warm-up
    one = median_rate([_copier(dst, src)], repeats, clock, most=MOST_REPEATS)
    bounds = np.linspace(0, nbytes, n + 1, dtype=np.int64)
    slices = [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]
    many = median_rate([_copier(dst[a:b], src[a:b]) for a, b in slices], repeats, clock, most=MOST_REPEATS)
    del dst
    fresh = median_rate([_fresh_writer(src)], min(2, max(1, repeats)), clock)
    # Each writer's buffer stays above glibc's largest mmap threshold (32 MiB), so every round maps new pages
    # instead of reusing a freed heap chunk whose pages were already touched.
    each = min(nbytes, max(nbytes // n, FRESH_WRITER_MIN_BYTES))
    fresh_n = median_rate([_fresh_writer(src[:each]) for _ in range(n)], min(2, max(1, repeats)), clock)
    return {
        "fresh_write_GBps": round3(fresh),
        "fresh_write_n_threads_GBps": round3(fresh_n),
        "memcpy_GBps": round3(one),
        "memcpy_n_threads_GBps": round3(many),
        "memcpy_threads": len(slices),
        "memcpy_bytes": nbytes,
    }


def _fresh_writer(src: np.ndarray) -> Callable[[], int]:
    """A copy into memory allocated for it: what `f.read()` into a new bytes object and a deserialiser's copy into
    new tensors pay, a page fault per 4 KiB on top of the copy (the memcpy ceiling reuses touched memory)."""

    def run() -> int:
        dst = np.empty(src.nbytes, dtype=np.uint8)  # large: mmap'd by malloc, no page touched yet
        np.copyto(dst, src)
        del dst  # munmap: the next round starts from untouched memory again
        return int(src.nbytes)

    return run


def _copier(dst: np.ndarray, src: np.ndarray) -> Callable[[], int]:
    def run() -> int:
        np.copyto(dst, src)  # numpy releases the GIL for plain dtype copies, so threads overlap
        return int(src.nbytes)

    return run
