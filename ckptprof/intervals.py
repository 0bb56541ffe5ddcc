"""Wall-clock arithmetic on (start, end) intervals recorded by several threads at once: how long any of them ran
(their union), and a wall cut into parts that add up to it. Pure; used by the recorder as a model ends."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Interval = tuple[float, float]


def union_seconds(intervals: Iterable[Interval]) -> float:
    """Seconds covered by at least one interval: a second two threads both spent counts once."""
    total = 0.0
    end = None
    start = 0.0
    for t0, t1 in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if end is None or t0 > end:
            if end is not None:
                total += end - start
            start, end = t0, t1
        else:
            end = max(end, t1)
    if end is not None:
        total += end - start
    return total


def split_wall(
    by_kind: Mapping[str, Sequence[Interval]], start: float, end: float, rest: str = "other"
) -> dict[str, float]:
    """``[start, end]`` cut into one part per kind plus ``rest``, adding up to its length: each instant goes to the
    kinds with an interval running then, split evenly between them when several ran at once (a pool thread opening
    a file while the rank's thread copies), and to ``rest`` when none did."""
    parts = {kind: 0.0 for kind in by_kind}
    parts[rest] = 0.0
    if end <= start:
        return parts
    # +1 as a kind's interval begins, -1 as it ends; clipped to the wall.
    events: list[tuple[float, int, str]] = []
    for kind, intervals in by_kind.items():
        for t0, t1 in intervals:
            t0, t1 = max(t0, start), min(t1, end)
            if t1 > t0:
                events.append((t0, 1, kind))
                events.append((t1, -1, kind))
    events.sort(key=lambda e: (e[0], e[1]))
    running = dict.fromkeys(by_kind, 0)
    active = 0  # kinds with at least one interval running
    now = start
    for t, step, kind in events:
        if t > now:
            if active:
                share = (t - now) / active
                for k, n in running.items():
                    if n:
                        parts[k] += share
            else:
                parts[rest] += t - now
            now = t
        before = running[kind]
        running[kind] = before + step
        active += (running[kind] > 0) - (before > 0)
    parts[rest] += max(0.0, end - now)
    return parts
