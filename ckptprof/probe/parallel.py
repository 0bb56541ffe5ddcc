"""Timing work spread over threads: released together, timed from the release to the last finish, repeated until
the rates agree; and the flag that stops readers early when the probe is interrupted."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from ckptprof.units import GB

Clock = Callable[[], float]

# Repeats of a rate whose spread (max - min) is within this fraction of the median need no more runs.
SETTLED_SPREAD = 0.10
MOST_REPEATS = 5


def default_streams() -> int:
    """Readers or copiers to run at once: twice the cores, at most 8."""
    return max(1, min(8, 2 * (os.cpu_count() or 1)))


# Set while an interrupted probe waits for its reader threads: each stops after the block it is reading.
CANCEL = threading.Event()


def timed_parallel(jobs: Sequence[Callable[[], int]], clock: Clock = time.perf_counter) -> tuple[int, float]:
    """Run the jobs on one thread each, released together; returns (sum of their results, wall seconds).

    The wall runs from the common release to the last finish, which is what an aggregate rate needs.
    """
    if len(jobs) == 1:
        t0 = clock()
        n = jobs[0]()
        return n, clock() - t0
    barrier = threading.Barrier(len(jobs) + 1)
    results: list[int] = [0] * len(jobs)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return  # the caller was interrupted before the start
        try:
            results[i] = jobs[i]()
        except BaseException as exc:  # re-raised in the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(jobs))]
    try:
        for t in threads:
            t.start()
        barrier.wait()
        t0 = clock()
        for t in threads:
            t.join()
    except BaseException:
        # Ctrl-C lands in this (main) thread. The readers must stop before their buffers are released (an
        # mmap closed under a pread is a BufferError that would hide the interrupt): they finish their block.
        CANCEL.set()
        barrier.abort()
        for t in threads:
            if t.ident is not None:  # started
                t.join()
        CANCEL.clear()
        raise
    elapsed = clock() - t0
    if errors:
        raise errors[0]
    return sum(results), elapsed


def rate(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / GB if seconds > 0 else 0.0


def round3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def median_rate(
    jobs: Sequence[Callable[[], int]], repeats: int, clock: Clock, most: int | None = None
) -> float:
    """The median rate of ``repeats`` timed runs; while they disagree by more than SETTLED_SPREAD, more runs up
    to ``most``: a quiet host pays for three, a noisy one gets the five a fixed count would always spend."""
    rates = []
    while True:
        nbytes, seconds = timed_parallel(jobs, clock)
        rates.append(rate(nbytes, seconds))
        if len(rates) < max(1, repeats):
            continue
        middle = statistics.median(rates)
        settled = middle <= 0 or (max(rates) - min(rates)) <= SETTLED_SPREAD * middle
        if settled or len(rates) >= max(repeats, most or repeats):
            return middle
