"""Read ceilings of the host: cold storage (1 and N streams), page cache (1 and N threads) and memcpy.

The storage probe reads the checkpoint's own files, on their own file system, bounded to a sample so a 1 TB
checkpoint does not take an hour. Every cold measurement drops the sample's pages first and records whether
the drop worked; O_DIRECT is used where the file system takes it (it bypasses the client page cache whatever
the drop did), else buffered reads after a verified drop. Files are only ever opened read-only.

All figures are GB/s with GB = 1e9 bytes.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import mmap
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from ckptprof.checkpoint import fs
from ckptprof.fstypes import is_network_fs
from ckptprof.units import GB

Clock = Callable[[], float]
Log = Callable[[str], None]

MiB = 1024 * 1024
DEFAULT_SAMPLE_BYTES = 2 * 10**9
DEFAULT_BLOCK_BYTES = 16 * MiB
# O_DIRECT needs offsets, lengths and buffer addresses aligned to the logical block size: 4096 covers both
# 512-byte and 4K-sector devices (anonymous mmap buffers are page-aligned).
DIRECT_ALIGN = 4096
# Per-file share of a sample: a floor keeps each stream's reads long enough to reach streaming speed.
MIN_REGION_BYTES = 64 * MiB
# The page-cache ceiling is a memory property: a bounded sample read a few times is enough, and must fit.
PAGE_CACHE_SAMPLE_CAP = 1 << 30
PAGE_CACHE_REPEATS = 3
# Repeats of a rate whose spread (max - min) is within this fraction of the median need no more runs.
SETTLED_SPREAD = 0.10
MOST_REPEATS = 5
MEMCPY_BYTES = 256 * MiB
FRESH_WRITER_MIN_BYTES = 64 * MiB
MEMCPY_REPEATS = 3

METHOD_O_DIRECT = "o_direct"
METHOD_BUFFERED_DROPPED = "buffered-dropped"
METHOD_BUFFERED_NOT_DROPPED = "buffered-not-dropped"


def default_streams() -> int:
    return max(1, min(8, 2 * (os.cpu_count() or 1)))


# -- the sample -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """A byte range of one file; ``offset`` is aligned for O_DIRECT."""

    path: Path
    offset: int
    length: int


def choose_sample(paths: Sequence[Path], sample_bytes: int) -> list[Region]:
    """Regions totalling about ``sample_bytes``: whole files when they fit, else a slice of files spread evenly.

    Spreading over many files (rather than the first 2 GB of the first shard) makes N streams read different
    files, as parallel loaders do, and avoids a sample that happens to sit on one disk of a striped volume.
    """
    sizes = [(Path(p), os.stat(p).st_size) for p in paths]
    sizes = [(p, s) for p, s in sizes if s > 0]
    total = sum(s for _, s in sizes)
    if total <= sample_bytes:
        return [Region(p, 0, s) for p, s in sizes]
    per_file = _align_up(max(MIN_REGION_BYTES, sample_bytes // len(sizes)), DIRECT_ALIGN)
    count = max(1, -(-sample_bytes // per_file))
    regions: list[Region] = []
    remaining = sample_bytes
    for path, size in _spread(sizes, count):
        if remaining <= 0:
            break
        length = min(size, per_file, _align_up(remaining, DIRECT_ALIGN))
        regions.append(Region(path, 0, length))
        remaining -= length
    # Files smaller than their share leave budget over: top it up from the remaining files in order.
    if remaining > 0:
        used = {r.path for r in regions}
        for path, size in sizes:
            if remaining <= 0:
                break
            if path in used:
                continue
            length = min(size, _align_up(remaining, DIRECT_ALIGN))
            regions.append(Region(path, 0, length))
            remaining -= length
    return regions


def _spread(items: list[tuple[Path, int]], count: int) -> list[tuple[Path, int]]:
    """``count`` items evenly spaced over the list (all of them when count >= len)."""
    if count >= len(items):
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def split_streams(regions: Sequence[Region], n: int) -> list[list[Region]]:
    """Cut the sample into ``n`` contiguous stretches of nearly equal bytes, one per stream.

    Cuts fall on aligned offsets so that every stream can use O_DIRECT.
    """
    total = sum(r.length for r in regions)
    n = max(1, min(n, max(1, total // DIRECT_ALIGN)))
    share = _align_up(-(-total // n), DIRECT_ALIGN)
    streams: list[list[Region]] = [[] for _ in range(n)]
    idx, room = 0, share
    for region in regions:
        offset, left = region.offset, region.length
        while left > 0:
            if room == 0 and idx < n - 1:
                idx, room = idx + 1, share
            # Round each cut up to the alignment: a region boundary inside a file must stay O_DIRECT-safe.
            take = left if idx == n - 1 else min(left, _align_up(room, DIRECT_ALIGN))
            room = max(0, room - take)
            streams[idx].append(Region(region.path, offset, take))
            offset, left = offset + take, left - take
    return [s for s in streams if s]


def disjoint_halves(regions: Sequence[Region]) -> tuple[list[Region], list[Region]]:
    """The sample cut in two halves of nearly equal bytes (aligned cuts); a sample too small to cut is used whole
    for both."""
    halves = split_streams(regions, 2)
    if len(halves) < 2:
        return list(regions), list(regions)
    return halves[0], halves[1]


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


# -- reading ----------------------------------------------------------------------------------------------------


# Set while an interrupted probe waits for its reader threads: each stops after the block it is reading.
_CANCEL = threading.Event()


def _aligned_buffer(nbytes: int) -> mmap.mmap:
    # Anonymous mappings are page-aligned, which O_DIRECT needs; a bytearray is not.
    return mmap.mmap(-1, _align_up(nbytes, mmap.PAGESIZE))


def read_regions(regions: Sequence[Region], block: int, direct: bool, buf: mmap.mmap) -> int:
    """Read every region with preads of ``block`` bytes; returns the bytes read."""
    total = 0
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    view = memoryview(buf)
    try:
        for path, regs in _by_file(regions):
            fd = os.open(path, flags)
            try:
                if not direct:
                    _advise_sequential(fd)
                for region in regs:
                    total += _read_region(fd, region, block, direct, view)
            finally:
                os.close(fd)
    finally:
        view.release()
    return total


def _read_region(fd: int, region: Region, block: int, direct: bool, view: memoryview) -> int:
    offset, end, done = region.offset, region.offset + region.length, 0
    while offset < end and not _CANCEL.is_set():
        want = min(block, end - offset)
        if direct:
            want = _align_up(want, DIRECT_ALIGN)  # a tail past EOF just reads short
        n = os.preadv(fd, [view[:want]], offset)
        if n <= 0:
            break  # the file shrank under us; count what was there
        n = min(n, end - offset)
        done += n
        offset += n
    return done


def _by_file(regions: Sequence[Region]) -> Iterator[tuple[Path, list[Region]]]:
    """Consecutive regions of the same file, so each file is opened once per stream."""
    current: Path | None = None
    group: list[Region] = []
    for region in regions:
        if region.path != current and group:
            assert current is not None
            yield current, group
            group = []
        current = region.path
        group.append(region)
    if group and current is not None:
        yield current, group


def _advise_sequential(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)


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
        _CANCEL.set()
        barrier.abort()
        for t in threads:
            if t.ident is not None:  # started
                t.join()
        _CANCEL.clear()
        raise
    elapsed = clock() - t0
    if errors:
        raise errors[0]
    return sum(results), elapsed


def read_streams(
    streams: Sequence[Sequence[Region]], block: int, direct: bool, clock: Clock = time.perf_counter
) -> tuple[int, float]:
    """Read each stream on its own thread (GIL released in pread); returns (bytes, wall seconds)."""
    buffers = [_aligned_buffer(block) for _ in streams]
    try:
        # Touch the buffers now so first-touch page faults are not timed as reads.
        for b in buffers:
            b.write(b"\0" * len(b))
            b.seek(0)
        jobs = [_reader(s, block, direct, b) for s, b in zip(streams, buffers, strict=True)]
        return timed_parallel(jobs, clock)
    finally:
        for b in buffers:
            b.close()


def _reader(regions: Sequence[Region], block: int, direct: bool, buf: mmap.mmap) -> Callable[[], int]:
    return lambda: read_regions(regions, block, direct, buf)


def o_direct_support(path: Path) -> tuple[bool, str]:
    """Whether O_DIRECT reads work on this file: (works, why not)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        return False, f"O_DIRECT open refused ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
    buf = _aligned_buffer(DIRECT_ALIGN)
    view = memoryview(buf)
    try:
        os.preadv(fd, [view], 0)
    except OSError as exc:
        return False, f"O_DIRECT read refused ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
    finally:
        view.release()
        buf.close()
        os.close(fd)
    return True, ""


# -- the measurements -------------------------------------------------------------------------------------------


def _rate(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / GB if seconds > 0 else 0.0


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


@dataclass
class ColdRead:
    gbps: float
    nbytes: int
    seconds: float
    drop: fs.CacheDropResult


def cold_read(
    regions: Sequence[Region],
    streams: int,
    block: int,
    direct: bool,
    clock: Clock = time.perf_counter,
) -> ColdRead:
    """Drop the sample's pages, then read it with ``streams`` threads."""
    drop = fs.drop_cache(sorted({r.path for r in regions}))
    nbytes, seconds = read_streams(split_streams(regions, streams), block, direct, clock)
    return ColdRead(_rate(nbytes, seconds), nbytes, seconds, drop)


def measure_storage(
    paths: Sequence[Path],
    sample_bytes: int = DEFAULT_SAMPLE_BYTES,
    streams: int | None = None,
    block: int = DEFAULT_BLOCK_BYTES,
    method: str = "auto",
    clock: Clock = time.perf_counter,
    log: Log | None = None,
    page_cache: bool = True,
) -> dict[str, Any]:
    """Cold storage read ceilings (1 and N streams) and, unless ``page_cache`` is False, the page-cache read
    ceiling on the given files.

    Each cold read reads up to ``sample_bytes``, and the two read disjoint halves of a sample of up to twice that:
    a probe of a small checkpoint reads each byte once (never more than the load it precedes), and the second
    read cannot be served by a cache the first one filled (a drive's, an NFS server's).
    ``method``: "auto" (O_DIRECT where it works, else buffered after a drop), "o_direct" or "buffered".
    """
    say = log or (lambda _msg: None)
    n = streams or default_streams()
    block = _align_up(block, DIRECT_ALIGN)
    files = [Path(p) for p in paths]
    regions = choose_sample(files, 2 * sample_bytes)
    notes: list[str] = []
    out: dict[str, Any] = empty_storage_result()
    if not regions:
        out["notes"] = ["no bytes to read: storage and page-cache ceilings not measured"]
        return out
    sample = sum(r.length for r in regions)
    fstype = fs.fs_type(regions[0].path)
    direct, why_not = _pick_direct(regions[0].path, method)
    if why_not:
        notes.append(f"{why_not} on {fstype}: buffered reads after dropping the page cache")

    first, second = disjoint_halves(regions)
    say(f"storage: cold read, 1 stream, {sum(r.length for r in first) / GB:.2f} GB")
    one = cold_read(first, 1, block, direct, clock)
    say(f"storage: cold read, {n} streams, {sum(r.length for r in second) / GB:.2f} GB")
    many = cold_read(second, n, block, direct, clock)
    drops = [one.drop, many.drop]
    verified = direct or all(d.ok for d in drops)
    storage_method = _method_name(direct, verified)
    notes.extend(_cold_notes(drops, direct, fstype))

    page: dict[str, Any] = {}
    if page_cache:
        say("page cache: warm read, 1 and N threads")
        page = measure_page_cache(second, n, block, clock)
        notes.extend(page.pop("notes"))

    out.update(
        {
            "storage_read_GBps": _round(max(one.gbps, many.gbps)),
            "storage_read_1_stream_GBps": _round(one.gbps),
            "storage_read_n_streams_GBps": _round(many.gbps),
            "storage_streams": n,
            "storage_method": storage_method,
            "storage_block_bytes": block,
            "storage_sample_bytes": sample,
            "storage_sample_files": len({r.path for r in regions}),
            "storage_cold_verified": verified,
            "storage_drop_note": many.drop.note,
            "fs_type": fstype,
            **page,
            "notes": notes,
        }
    )
    return out


def empty_storage_result() -> dict[str, Any]:
    return {
        "storage_read_GBps": None,
        "storage_read_1_stream_GBps": None,
        "storage_read_n_streams_GBps": None,
        "storage_streams": None,
        "storage_method": None,
        "storage_block_bytes": None,
        "storage_sample_bytes": 0,
        "storage_sample_files": 0,
        "storage_cold_verified": False,
        "storage_drop_note": "",
        "fs_type": None,
        "page_cache_read_GBps": None,
        "page_cache_read_1_thread_GBps": None,
        "page_cache_read_n_threads_GBps": None,
        "page_cache_sample_bytes": 0,
        "notes": [],
    }


def _pick_direct(path: Path, method: str) -> tuple[bool, str]:
    if method == "buffered":
        return False, ""
    if method not in ("auto", "o_direct"):
        raise ValueError(f"unknown storage probe method {method!r} (auto, o_direct, buffered)")
    works, why = o_direct_support(path)
    if not works and method == "o_direct":
        raise OSError(errno.EINVAL, f"{path}: {why}")
    return works, why


def _method_name(direct: bool, verified: bool) -> str:
    if direct:
        return METHOD_O_DIRECT
    return METHOD_BUFFERED_DROPPED if verified else METHOD_BUFFERED_NOT_DROPPED


def _cold_notes(drops: Sequence[fs.CacheDropResult], direct: bool, fstype: str) -> list[str]:
    notes: list[str] = []
    failed = [d for d in drops if not d.ok]
    if failed and not direct:
        notes.append(f"cold read not verified: {failed[0].note}")
    elif failed:
        notes.append(f"page cache not dropped ({failed[0].note}); O_DIRECT reads bypass it anyway")
    if fstype in ("tmpfs", "ramfs"):
        notes.append(f"the files live in memory ({fstype}): the storage figure is a memory read")
    elif is_network_fs(fstype) or fstype == "unknown":
        notes.append(
            f"{fstype}: the client's cache was bypassed or dropped, but the server may still have served "
            "the sample from its own cache"
        )
    return notes


def measure_page_cache(
    regions: Sequence[Region],
    streams: int,
    block: int = DEFAULT_BLOCK_BYTES,
    clock: Clock = time.perf_counter,
    repeats: int = PAGE_CACHE_REPEATS,
) -> dict[str, Any]:
    """Read a warm sample (at most 1 GiB, and what memory allows) with 1 and N threads; median of repeats.

    The files stay open from warming to the last read: on FUSE without kernel_cache every open() throws the
    cached pages away, so re-opening would measure the network instead of memory.
    """
    cap = min(PAGE_CACHE_SAMPLE_CAP, psutil.virtual_memory().available // 4)
    sample = _truncate(regions, cap)
    fds = {p: os.open(p, os.O_RDONLY) for p in sorted({r.path for r in sample})}
    notes: list[str] = []
    try:
        nbytes = sum(r.length for r in sample)
        one_fd_jobs = _fd_streams(sample, 1, fds, block)
        one_fd_jobs[0]()  # warm: brings the sample into the page cache through the fds we will time
        resident = sum(fs.resident_bytes_fd(fds[r.path], r.offset, r.length) for r in sample)
        if nbytes and resident < 0.9 * nbytes:
            notes.append(
                f"page-cache sample only {100.0 * resident / nbytes:.0f}% resident after warming: "
                "the page-cache figure includes storage reads"
            )
        one = _median_rate(one_fd_jobs, repeats, clock, most=MOST_REPEATS)
        many = _median_rate(_fd_streams(sample, streams, fds, block), repeats, clock, most=MOST_REPEATS)
    finally:
        for fd in fds.values():
            os.close(fd)
    return {
        "page_cache_read_GBps": _round(max(one, many)),
        "page_cache_read_1_thread_GBps": _round(one),
        "page_cache_read_n_threads_GBps": _round(many),
        "page_cache_sample_bytes": nbytes,
        "notes": notes,
    }


def _truncate(regions: Sequence[Region], cap: int) -> list[Region]:
    out: list[Region] = []
    left = cap
    for r in regions:
        if left <= 0:
            break
        out.append(Region(r.path, r.offset, min(r.length, left)))
        left -= r.length
    return out


def _fd_streams(
    regions: Sequence[Region], n: int, fds: dict[Path, int], block: int
) -> list[Callable[[], int]]:
    jobs: list[Callable[[], int]] = []
    for stream in split_streams(regions, n):
        buf = bytearray(block)
        jobs.append(_fd_reader(stream, fds, buf))
    return jobs


def _fd_reader(stream: Sequence[Region], fds: dict[Path, int], buf: bytearray) -> Callable[[], int]:
    def run() -> int:
        view = memoryview(buf)
        total = 0
        for region in stream:
            total += _read_region(fds[region.path], region, len(buf), False, view)
        return total

    return run


def _median_rate(
    jobs: Sequence[Callable[[], int]], repeats: int, clock: Clock, most: int | None = None
) -> float:
    """The median rate of ``repeats`` timed runs; while they disagree by more than SETTLED_SPREAD, more runs up
    to ``most``: a quiet host pays for three, a noisy one gets the five a fixed count would always spend."""
    rates = []
    while True:
        nbytes, seconds = timed_parallel(jobs, clock)
        rates.append(_rate(nbytes, seconds))
        if len(rates) < max(1, repeats):
            continue
        middle = statistics.median(rates)
        settled = middle <= 0 or (max(rates) - min(rates)) <= SETTLED_SPREAD * middle
        if settled or len(rates) >= max(repeats, most or repeats):
            return middle


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
    one = _median_rate([_copier(dst, src)], repeats, clock, most=MOST_REPEATS)
    bounds = np.linspace(0, nbytes, n + 1, dtype=np.int64)
    slices = [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]
    many = _median_rate([_copier(dst[a:b], src[a:b]) for a, b in slices], repeats, clock, most=MOST_REPEATS)
    del dst
    fresh = _median_rate([_fresh_writer(src)], min(2, max(1, repeats)), clock)
    # Each writer's buffer stays above glibc's largest mmap threshold (32 MiB), so every round maps new pages
    # instead of reusing a freed heap chunk whose pages were already touched.
    each = min(nbytes, max(nbytes // n, FRESH_WRITER_MIN_BYTES))
    fresh_n = _median_rate([_fresh_writer(src[:each]) for _ in range(n)], min(2, max(1, repeats)), clock)
    return {
        "fresh_write_GBps": _round(fresh),
        "fresh_write_n_threads_GBps": _round(fresh_n),
        "memcpy_GBps": _round(one),
        "memcpy_n_threads_GBps": _round(many),
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
