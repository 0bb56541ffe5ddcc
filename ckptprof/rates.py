"""Pricing a load from measured points: the time of one file of a given size read off (bytes, seconds) samples,
and a batched load from those times. Pure arithmetic, below the probe that measures the samples and the analysis
that prices recommendations with them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def seconds_for(sample: Sequence[Sequence[float]], size: int) -> float:
    """The time one file of ``size`` bytes takes, read off the sampled (bytes, seconds) points.

    Between two points, a straight line; below the smallest, its time scaled down in proportion; above the
    largest, its time plus the rest at the rate the two largest points show (the largest's own rate when they
    do not rise). Not one line through all points: a file smaller than the package's 16 MiB bounce buffer is read
    by one of its threads and a large one by all 16, so time is not linear in bytes."""
    points = sorted((float(b), float(s)) for b, s in sample if b > 0 and s > 0)
    if not points or size <= 0:
        return 0.0
    first_b, first_s = points[0]
    if size <= first_b:
        return first_s * size / first_b
    for (b0, s0), (b1, s1) in itertools.pairwise(points):
        if size <= b1:
            return s0 + (s1 - s0) * (size - b0) / (b1 - b0) if b1 > b0 else max(s0, s1)
    last_b, last_s = points[-1]
    per_byte = last_s / last_b
    if len(points) >= 2:
        b0, s0 = points[-2]
        if last_b > b0 and last_s > s0:
            per_byte = (last_s - s0) / (last_b - b0)
    return last_s + (size - last_b) * per_byte


def predicted_seconds(
    sample: Sequence[Sequence[float]] | None, batches: Sequence[Sequence[int]]
) -> float | None:
    """fastsafetensors' load of files in ``batches`` (file sizes; one batch = one file per rank, read at once, and
    no rank goes on before the batch's slowest file is read), from the measured (bytes, seconds) sample (the
    ``fastsafetensors_sample`` ceiling); None without one."""
    if not sample:
        return None
    return sum(max((seconds_for(sample, size) for size in batch), default=0.0) for batch in batches)
