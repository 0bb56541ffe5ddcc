"""Read ceilings of the host's storage: cold storage (1 and N streams) and page cache (1 and N threads).

The storage probe reads the checkpoint's own files, on their own file system, bounded to a sample so a 1 TB
checkpoint does not take an hour. Every cold measurement drops the sample's pages first and records whether
the drop worked; O_DIRECT is used where the file system takes it (it bypasses the client page cache whatever
the drop did), else buffered reads after a verified drop. Files are only ever opened read-only.

All figures are GB/s with GB = 1e9 bytes. The sample is sampling.py's, the threads' timing parallel.py's, the
memory ceilings memcpy.py's.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ckptprof.checkpoint import diskstats, fs
from ckptprof.fstypes import is_network_fs
from ckptprof.probe import contention
from ckptprof.probe.parallel import (
    CANCEL,
    MOST_REPEATS,
    Clock,
    default_streams,
    median_rate,
    rate,
    round3,
    timed_parallel,
)
from ckptprof.probe.sampling import (
    DIRECT_ALIGN,
    MiB,
    Region,
    align_up,
    choose_sample,
    disjoint_halves,
    split_streams,
)
from ckptprof.units import GB

Log = Callable[[str], None]

DEFAULT_SAMPLE_BYTES = 2 * 10**9
DEFAULT_BLOCK_BYTES = 16 * MiB
# The page-cache ceiling is a memory property: a bounded sample read a few times is enough, and must fit.
PAGE_CACHE_SAMPLE_CAP = 1 << 30
PAGE_CACHE_REPEATS = 3

METHOD_O_DIRECT = "o_direct"
METHOD_BUFFERED_DROPPED = "buffered-dropped"
METHOD_BUFFERED_NOT_DROPPED = "buffered-not-dropped"


# -- reading ----------------------------------------------------------------------------------------------------


def _aligned_buffer(nbytes: int) -> mmap.mmap:
    # Anonymous mappings are page-aligned, which O_DIRECT needs; a bytearray is not.
    return mmap.mmap(-1, align_up(nbytes, mmap.PAGESIZE))


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
    while offset < end and not CANCEL.is_set():
        want = min(block, end - offset)
        if direct:
            want = align_up(want, DIRECT_ALIGN)  # a tail past EOF just reads short
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
    return ColdRead(rate(nbytes, seconds), nbytes, seconds, drop)


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
    block = align_up(block, DIRECT_ALIGN)
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
    # Every process's reads count in the device's counters: more than the probe's own means it was not alone.
    device = diskstats.device_for(regions[0].path)
    device_before = diskstats.sample(device) if device else None
    say(f"storage: cold read, 1 stream, {sum(r.length for r in first) / GB:.2f} GB")
    one = cold_read(first, 1, block, direct, clock)
    say(f"storage: cold read, {n} streams, {sum(r.length for r in second) / GB:.2f} GB")
    many = cold_read(second, n, block, direct, clock)
    if device:
        busy = contention.device_busy_note(
            device, device_before, diskstats.sample(device), one.nbytes + many.nbytes
        )
        if busy:
            notes.append(busy)
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
            "storage_read_GBps": round3(max(one.gbps, many.gbps)),
            "storage_read_1_stream_GBps": round3(one.gbps),
            "storage_read_n_streams_GBps": round3(many.gbps),
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
        one = median_rate(one_fd_jobs, repeats, clock, most=MOST_REPEATS)
        many = median_rate(_fd_streams(sample, streams, fds, block), repeats, clock, most=MOST_REPEATS)
    finally:
        for fd in fds.values():
            os.close(fd)
    return {
        "page_cache_read_GBps": round3(max(one, many)),
        "page_cache_read_1_thread_GBps": round3(one),
        "page_cache_read_n_threads_GBps": round3(many),
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
