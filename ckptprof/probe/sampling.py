"""The sample a storage probe reads: byte ranges of the checkpoint's own files, spread over them, cut into
streams on O_DIRECT-safe boundaries."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024
# O_DIRECT needs offsets, lengths and buffer addresses aligned to the logical block size: 4096 covers both
# 512-byte and 4K-sector devices (anonymous mmap buffers are page-aligned).
DIRECT_ALIGN = 4096
# Per-file share of a sample: a floor keeps each stream's reads long enough to reach streaming speed.
MIN_REGION_BYTES = 64 * MiB


def align_up(value: int, align: int) -> int:
    return -(-value // align) * align


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
    per_file = align_up(max(MIN_REGION_BYTES, sample_bytes // len(sizes)), DIRECT_ALIGN)
    count = max(1, -(-sample_bytes // per_file))
    regions: list[Region] = []
    remaining = sample_bytes
    for path, size in _spread(sizes, count):
        if remaining <= 0:
            break
        length = min(size, per_file, align_up(remaining, DIRECT_ALIGN))
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
            length = min(size, align_up(remaining, DIRECT_ALIGN))
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
    share = align_up(-(-total // n), DIRECT_ALIGN)
    streams: list[list[Region]] = [[] for _ in range(n)]
    idx, room = 0, share
    for region in regions:
        offset, left = region.offset, region.length
        while left > 0:
            if room == 0 and idx < n - 1:
                idx, room = idx + 1, share
            # Round each cut up to the alignment: a region boundary inside a file must stay O_DIRECT-safe.
            take = left if idx == n - 1 else min(left, align_up(room, DIRECT_ALIGN))
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
